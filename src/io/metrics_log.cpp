// io/metrics_log.cpp: metrics.jsonl, written one flushed line at a time and read back
// tolerating the partial last line a kill -9 can leave.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/byte_source.h"
#include "mixprec/io/run_dir.h"

namespace mixprec {

namespace {

using json = nlohmann::json;

struct RawLine {
  std::string text;
  bool complete;  // ended with '\n'
};

StatusOr<std::vector<RawLine>> read_lines(const std::string& path, bool missing_ok) {
  // Through open_regular_file: a FIFO or device placed here is refused, never waited on.
  auto read = io::read_regular_file(path, "metrics log", std::numeric_limits<uint64_t>::max());
  if (!read.is_ok()) {
    if (read.status().code() == StatusCode::not_found && missing_ok) return std::vector<RawLine>{};
    if (read.status().code() == StatusCode::not_found)
      return Status::not_found("metrics log '" + path + "': no such file");
    return read.status();
  }
  const std::string& all = *read;
  std::vector<RawLine> lines;
  size_t start = 0;
  while (start < all.size()) {
    const size_t nl = all.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back({all.substr(start), false});
      break;
    }
    lines.push_back({all.substr(start, nl - start), true});
    start = nl + 1;
  }
  return lines;
}

// null stands for a non-finite value (JSON has no NaN/inf).
bool number_field(const json& j, const char* key, double& out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if (it->is_null()) {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (!it->is_number()) return false;
  out = it->get<double>();
  return true;
}

bool int_field(const json& j, const char* key, int64_t& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  out = it->get<int64_t>();
  return true;
}

// Ok with nullopt for a well-formed line of a type this reader does not know (newer writers
// may add some); an error string for a malformed one.
std::optional<std::string> parse_record(const std::string& text, std::optional<MetricsRecord>& out) {
  out.reset();
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object";
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) return "field 'type' missing or not a string";
  if (*type != "step" && *type != "eval") return std::nullopt;
  MetricsRecord r;
  if (!int_field(j, "step", r.step)) return "field 'step': expected an integer";
  if (!int_field(j, "epoch", r.epoch)) return "field 'epoch': expected an integer";
  if (!number_field(j, "loss", r.loss)) return "field 'loss': expected a number";
  if (*type == "step") {
    r.kind = MetricsRecord::Kind::step;
    if (!number_field(j, "lr", r.lr)) return "field 'lr': expected a number";
    if (!number_field(j, "scale", r.scale)) return "field 'scale': expected a number";
    if (!number_field(j, "time", r.seconds)) return "field 'time': expected a number";
    auto sk = j.find("skipped");
    if (sk == j.end() || !sk->is_boolean()) return "field 'skipped': expected true or false";
    r.skipped = sk->get<bool>();
  } else {
    r.kind = MetricsRecord::Kind::eval;
    if (!number_field(j, "accuracy", r.accuracy)) return "field 'accuracy': expected a number";
  }
  out = r;
  return std::nullopt;
}

struct Parsed {
  MetricsFile file;
  std::vector<std::string> kept_text;  // complete lines, with their step (-1: no step)
  std::vector<int64_t> kept_step;
  bool dropped_partial = false;
};

StatusOr<Parsed> parse_lines(const std::string& path, const std::vector<RawLine>& lines) {
  Parsed p;
  for (size_t i = 0; i < lines.size(); ++i) {
    const RawLine& line = lines[i];
    if (line.text.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::optional<MetricsRecord> rec;
    if (auto err = parse_record(line.text, rec)) {
      const bool last = i + 1 == lines.size();
      if (last && !line.complete) {  // cut off mid-write by a kill: expected, not corruption
        p.file.truncated_last_line = true;
        p.dropped_partial = true;
        continue;
      }
      return Status::data_loss("metrics log '" + path + "': line " + std::to_string(i + 1) + ": " + *err);
    }
    if (!line.complete) p.dropped_partial = true;  // valid but unterminated: rewrite adds '\n'
    if (rec) p.file.records.push_back(*rec);
    p.kept_text.push_back(line.text);
    p.kept_step.push_back(rec ? rec->step : -1);
  }
  return p;
}

std::string format_number(double v) { return std::isfinite(v) ? json(v).dump() : "null"; }

}  // namespace

StatusOr<MetricsFile> read_metrics(const std::string& path) {
  auto lines = read_lines(path, /*missing_ok=*/false);
  if (!lines.is_ok()) return lines.status();
  auto parsed = parse_lines(path, *lines);
  if (!parsed.is_ok()) return parsed.status();
  return std::move(parsed->file);
}

StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::open(const std::string& path,
                                                       std::optional<int64_t> keep_through_step) {
  auto lines = read_lines(path, /*missing_ok=*/true);
  if (!lines.is_ok()) return lines.status();
  auto parsed = parse_lines(path, *lines);
  if (!parsed.is_ok()) return parsed.status();
  bool rewrite = parsed->dropped_partial;
  std::string text;
  for (size_t i = 0; i < parsed->kept_text.size(); ++i) {
    if (keep_through_step && parsed->kept_step[i] > *keep_through_step) {
      rewrite = true;  // logged after the checkpoint we resume from: will be logged again
      continue;
    }
    text += parsed->kept_text[i] + "\n";
  }
  if (rewrite) {
    auto w = io::AtomicFileWriter::create(path);
    if (!w.is_ok()) return w.status();
    MIXPREC_RETURN_IF_ERROR((*w)->write(text.data(), text.size()));
    MIXPREC_RETURN_IF_ERROR((*w)->commit());
  }
  FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) return Status::io_error("metrics log '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<MetricsLog>(new MetricsLog(path, f));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

Status MetricsLog::write_line(const std::string& line) {
  const std::string text = line + "\n";
  // One fwrite + fflush per record: a kill between records loses nothing, one during the
  // write leaves a single partial line that the reader skips.
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    return Status::io_error("metrics log '" + path_ + "': write failed: " + std::strerror(errno));
  return Status::ok();
}

Status MetricsLog::log_step(int64_t step, int64_t epoch, double loss, double lr, double scale,
                            bool skipped, double seconds, const StepExtras& extras) {
  std::string line = "{\"type\":\"step\",\"step\":" + std::to_string(step) + ",\"epoch\":" +
                     std::to_string(epoch) + ",\"loss\":" + format_number(loss) + ",\"lr\":" +
                     format_number(lr) + ",\"scale\":" + format_number(scale) + ",\"skipped\":" +
                     (skipped ? "true" : "false") + ",\"time\":" + format_number(seconds);
  if (extras.memory_bytes >= 0) line += ",\"memory_bytes\":" + std::to_string(extras.memory_bytes);
  if (extras.peak_memory_bytes >= 0) line += ",\"peak_memory_bytes\":" + std::to_string(extras.peak_memory_bytes);
  if (extras.ranks > 1) line += ",\"ranks\":" + std::to_string(extras.ranks);
  if (!extras.overflow.empty()) {
    // Parameter names come from model files (user input): serialised by the JSON library,
    // with invalid UTF-8 replaced, so a line always parses.
    json names = json::array();
    for (size_t i = 0; i < extras.overflow.size() && i < kMaxOverflowNames; ++i)
      names.push_back({{"tensor", extras.overflow[i].first}, {"values", extras.overflow[i].second}});
    line += ",\"overflow\":" + names.dump(-1, ' ', false, json::error_handler_t::replace) +
            ",\"overflow_tensors\":" + std::to_string(std::max<int64_t>(extras.overflow_tensors,
                                                                        int64_t(extras.overflow.size())));
  }
  if (extras.underflow) {
    const GradientUnderflow& u = *extras.underflow;
    json worst = json::array();
    for (size_t i = 0; i < u.worst.size() && i < GradientUnderflow::kMaxNames; ++i)
      worst.push_back({{"tensor", u.worst[i].name}, {"values", u.worst[i].values},
                       {"subnormal", u.worst[i].subnormal}, {"flushed", u.worst[i].flushed}});
    // Scaled gradients against f16's range: "dtype" says which range the counts are about.
    const json j = {{"dtype", "f16"}, {"values", u.values}, {"subnormal", u.subnormal}, {"flushed", u.flushed},
                    {"tensors", std::max<int64_t>(u.tensors, int64_t(worst.size()))}, {"worst", worst}};
    line += ",\"grad_underflow\":" + j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return write_line(line + "}");
}

Status MetricsLog::log_eval(int64_t step, int64_t epoch, double accuracy, double loss, double seconds) {
  return write_line("{\"type\":\"eval\",\"step\":" + std::to_string(step) + ",\"epoch\":" +
                    std::to_string(epoch) + ",\"accuracy\":" + format_number(accuracy) +
                    ",\"loss\":" + format_number(loss) +
                    (seconds >= 0 ? ",\"seconds\":" + format_number(seconds) : std::string()) + "}");
}

}  // namespace mixprec
