// io/checkpoint.cpp: TrainingState <-> one safetensors file, and checkpoint file names.
// Whether a checkpoint may be resumed from is checkpoint_checks.cpp; a run directory's
// checkpoints (the last/best pointers, listing, pruning, the newest usable one) are
// checkpoint_dir.cpp. Both call this file, which calls neither.
// The safetensors layer (safetensors.cpp) already validates the container (truncation,
// offsets, trailing bytes); this file validates what mixprec puts in it: format, version,
// every metadata key and its type, and that every tensor belongs to the model, the
// optimizer or the masters.
#include "mixprec/io/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "core/convert.h"
#include "io/checkpoint_format.h"
#include "io/json_limits.h"
#include "mixprec/io/safetensors.h"

#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "checkpoint.cpp must be compiled without fast-math: it checks for inf/NaN"
#endif

namespace mixprec {

namespace {

using json = nlohmann::json;

using io::kMasterPrefix;
using io::kOptimizerPrefix;

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// JSON has no inf/NaN: a scaler value that is not finite is stored as a string.
json encode_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

bool decode_double(const json& j, double& out) {
  if (j.is_number()) {
    out = j.get<double>();
    return true;
  }
  if (!j.is_string()) return false;
  const std::string s = j.get<std::string>();
  if (s == "nan") out = std::numeric_limits<double>::quiet_NaN();
  else if (s == "inf") out = std::numeric_limits<double>::infinity();
  else if (s == "-inf") out = -std::numeric_limits<double>::infinity();
  else return false;
  return true;
}

// Validation of the metadata of one file; every message names the file and the key.
class MetadataReader {
 public:
  MetadataReader(const std::map<std::string, std::string>& md, const std::string& file)
      : md_(md), file_(file) {}

  Status bad(const std::string& key, const std::string& what) const {
    return Status::data_loss("checkpoint '" + file_ + "': metadata key '" + key + "': " + what);
  }
  StatusOr<std::string> str(const std::string& key) const {
    auto it = md_.find(key);
    if (it == md_.end()) return bad(key, "missing (required; is this a mixprec checkpoint?)");
    return it->second;
  }
  StatusOr<int64_t> count(const std::string& key) const {
    auto s = str(key);
    if (!s.is_ok()) return s.status();
    const std::string& v = *s;
    // Plain decimal digits only: no sign, no spaces, no exponent, at most 18 digits (fits).
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
      return bad(key, "expected a non-negative decimal integer, got '" + v.substr(0, 40) + "'");
    return int64_t(std::stoll(v));
  }
  StatusOr<json> json_value(const std::string& key, json::value_t expected, const char* type) const {
    auto s = str(key);
    if (!s.is_ok()) return s.status();
    // Deeper nesting would overflow the stack in dump() or a copy (io/json_limits.h).
    if (!io::json_depth_within(*s))
      return bad(key, std::string("JSON nested deeper than ") + std::to_string(io::kMaxJsonDepth) + " levels");
    json j = json::parse(*s, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad(key, std::string("expected a JSON ") + type + ", got text that is not JSON");
    if (j.type() != expected)
      return bad(key, std::string("expected a JSON ") + type + ", got a JSON " + j.type_name());
    return j;
  }

 private:
  const std::map<std::string, std::string>& md_;
  const std::string& file_;
};

StatusOr<TrainingState> from_file(SafetensorsFile file, const std::string& name) {
  MetadataReader md(file.metadata, name);
  TrainingState st;
  st.checksums = file.checksums;
  auto format = md.str("format");
  if (!format.is_ok()) return format.status();
  if (*format != kCheckpointFormat)
    return md.bad("format", std::string("expected '") + kCheckpointFormat + "', got '" +
                                format->substr(0, 60) + "' (a plain safetensors file, not a checkpoint?)");
  auto version = md.str("version");
  if (!version.is_ok()) return version.status();
  if (*version != kCheckpointVersion)
    return md.bad("version", std::string("expected '") + kCheckpointVersion + "', got '" +
                                 version->substr(0, 20) + "' (written by another mixprec version?)");
  auto model_name = md.str("model_name");
  if (!model_name.is_ok()) return model_name.status();
  auto precision = md.str("precision");
  if (!precision.is_ok()) return precision.status();
  auto rng = md.str("rng_state");
  if (!rng.is_ok()) return rng.status();
  st.model_name = *model_name;
  st.precision = *precision;
  st.rng_state = *rng;

  struct Counter {
    const char* key;
    int64_t* dst;
  };
  for (Counter c : {Counter{"optimizer_steps", &st.optimizer_steps}, Counter{"epoch", &st.epoch},
                    Counter{"batch_in_epoch", &st.batch_in_epoch}, Counter{"global_step", &st.global_step}}) {
    auto v = md.count(c.key);
    if (!v.is_ok()) return v.status();
    *c.dst = *v;
  }

  auto config = md.json_value("config", json::value_t::object, "object");
  if (!config.is_ok()) return config.status();
  st.config_json = md.str("config").value();

  auto scaler = md.json_value("scaler", json::value_t::object, "object");
  if (!scaler.is_ok()) return scaler.status();
  for (const auto& [key, value] : scaler->items()) {
    double d = 0;
    if (!decode_double(value, d))
      return md.bad("scaler", "entry '" + key + "': expected a number, got " + value.dump().substr(0, 40));
    st.scaler[key] = d;
  }

  auto order = md.json_value("model_tensors", json::value_t::array, "array");
  if (!order.is_ok()) return order.status();
  std::map<std::string, Tensor> by_name;
  for (auto& [n, t] : file.tensors) by_name.emplace(n, t);
  std::set<std::string> model_names;
  for (const json& n : *order) {
    if (!n.is_string()) return md.bad("model_tensors", "expected strings, got " + n.dump().substr(0, 40));
    const std::string s = n.get<std::string>();
    if (!model_names.insert(s).second) return md.bad("model_tensors", "names '" + s + "' twice");
    auto it = by_name.find(s);
    if (it == by_name.end())
      return md.bad("model_tensors", "names '" + s + "', but the file has no tensor of that name");
    st.model.emplace_back(s, it->second);
  }
  for (auto& [n, t] : file.tensors) {
    if (model_names.count(n)) continue;
    if (starts_with(n, kOptimizerPrefix)) st.optimizer.emplace(n.substr(std::strlen(kOptimizerPrefix)), t);
    else if (starts_with(n, kMasterPrefix)) st.masters.emplace(n.substr(std::strlen(kMasterPrefix)), t);
    else
      return Status::data_loss("checkpoint '" + name + "': tensor '" + n +
                               "' is neither listed in metadata key 'model_tensors' nor prefixed "
                               "'optimizer.' or 'master.'");
  }
  return st;
}

}  // namespace

Status check_checkpoint_encodable(const TrainingState& st) {
  auto shown = [](const std::string& s) {  // invalid bytes as U+FFFD: the message itself must print
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  auto bad = [&](const std::string& what, const std::string& value) {
    return Status::invalid_argument("checkpoint " + what + " " + shown(value) +
                                    " is not UTF-8 text; a checkpoint's header is JSON, which holds UTF-8 only");
  };
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"model_name", &st.model_name},
                                   {"precision", &st.precision},
                                   {"rng_state", &st.rng_state},
                                   {"config", &st.config_json}})
    if (!io::is_valid_utf8(*value)) return bad(std::string("metadata key '") + key + "':", *value);
  for (const auto& [n, t] : st.model)
    if (!io::is_valid_utf8(n)) return bad("tensor name", n);
  for (const auto* names : {&st.optimizer, &st.masters})
    for (const auto& [n, t] : *names)
      if (!io::is_valid_utf8(n)) return bad("tensor name", n);
  return Status::ok();
}

Status save_checkpoint(const std::string& path, const TrainingState& st) {
  auto bad = [&](const std::string& what) {
    return Status::invalid_argument("save_checkpoint '" + path + "': " + what);
  };
  const std::pair<const char*, int64_t> counters[] = {{"optimizer_steps", st.optimizer_steps},
                                                      {"epoch", st.epoch},
                                                      {"batch_in_epoch", st.batch_in_epoch},
                                                      {"global_step", st.global_step}};
  for (const auto& [key, v] : counters)
    if (v < 0) return bad(std::string(key) + " must be >= 0, got " + std::to_string(v));
  json config = st.config_json.empty() ? json::object() : json::parse(st.config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return bad("config_json is not a JSON object");

  std::vector<std::pair<std::string, Tensor>> tensors;
  json order = json::array();
  for (const auto& [n, t] : st.model) {
    if (starts_with(n, kOptimizerPrefix) || starts_with(n, kMasterPrefix))
      return bad("model tensor '" + n + "' collides with the reserved prefixes 'optimizer.' / 'master.'");
    tensors.emplace_back(n, t);
    order.push_back(n);
  }
  for (const auto& [n, t] : st.optimizer) tensors.emplace_back(kOptimizerPrefix + n, t);
  for (const auto& [n, t] : st.masters) tensors.emplace_back(kMasterPrefix + n, t);

  json scaler = json::object();
  for (const auto& [k, v] : st.scaler) scaler[k] = encode_double(v);
  std::map<std::string, std::string> md{
      {"format", kCheckpointFormat},
      {"version", kCheckpointVersion},
      {"model_name", st.model_name},
      {"precision", st.precision},
      {"model_tensors", order.dump()},
      {"scaler", scaler.dump()},
      {"rng_state", st.rng_state},
      {"optimizer_steps", std::to_string(st.optimizer_steps)},
      {"epoch", std::to_string(st.epoch)},
      {"batch_in_epoch", std::to_string(st.batch_in_epoch)},
      {"global_step", std::to_string(st.global_step)},
      {"config", st.config_json.empty() ? std::string("{}") : st.config_json},
  };
  // save_safetensors reports duplicates (including a model name repeated) as invalid_argument.
  return save_safetensors(path, tensors, md);
}

StatusOr<TrainingState> load_checkpoint(const std::string& path) {
  auto file = load_safetensors(path);
  if (!file.is_ok()) return file.status();
  return from_file(std::move(file).value(), path);
}

StatusOr<TrainingState> parse_checkpoint(const uint8_t* data, size_t size, const std::string& name) {
  auto file = parse_safetensors(data, size, name);
  if (!file.is_ok()) return file.status();
  return from_file(std::move(file).value(), name);
}

std::string checkpoint_filename(int64_t global_step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "step-%08lld.safetensors", (long long)global_step);
  return buf;
}

std::string nonfinite_checkpoint_filename(int64_t global_step) {
  return "nonfinite-" + checkpoint_filename(global_step);
}

}  // namespace mixprec
