// io/checkpoint_checks.cpp: whether a checkpoint may be continued from, apart from whether
// it is well formed (checkpoint.cpp): inf/NaN in any tensor (find_nonfinite), a scaler,
// counters and rng_state a resume can use (check_resumable, one line per problem), and the
// one load-and-check sequence (load_usable_checkpoint) that a pointer, a resume and a
// rollback all go through (checkpoint_dir.cpp). Uses checkpoint.cpp; is used by
// checkpoint_dir.cpp; neither calls back.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "core/convert.h"
#include "core/nonfinite_scan.h"
#include "io/checkpoint_format.h"
#include "io/checkpoint_checks.h"
#include "mixprec/io/checkpoint.h"

#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "checkpoint_checks.cpp must be compiled without fast-math: it checks for inf/NaN"
#endif

namespace mixprec {

namespace {

using io::kMasterPrefix;
using io::kOptimizerPrefix;

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// One scan of one tensor, folded into the report.
void scan(const std::string& name, const Tensor& t, std::optional<NonFiniteReport>& report) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return;
  const Tensor dense = t.is_dense() ? t : t.contiguous();
  const UnscaleResult r = mixprec::find_nonfinite(dense);
  if (r.nonfinite == 0) return;
  if (!report) {
    report.emplace();
    report->first_tensor = name;
    report->first_index = r.first_index;
    report->first_value = load_as_double(dense.data(), dense.dtype(), r.first_index);
    report->first_count = r.nonfinite;
  }
  report->tensors += 1;
  report->values += r.nonfinite;
}

// 2^53: the largest integer a double (the scaler state's type, and JSON's number) holds
// exactly; no real run comes near it, so anything above is corruption.
constexpr double kMaxCount = 9007199254740992.0;

// The problems of one file, one line each, all collected before the status is built.
class Problems {
 public:
  explicit Problems(const std::string& file) : file_(file) {}
  void add(const std::string& field, const std::string& what) {
    lines_.push_back("checkpoint '" + file_ + "': " + field + ": " + what);
  }
  Status status() const {
    if (lines_.empty()) return Status::ok();
    std::string m;
    for (const std::string& l : lines_) m += (m.empty() ? "" : "\n") + l;
    return Status::data_loss(m);
  }

 private:
  const std::string& file_;
  std::vector<std::string> lines_;
};

// libstdc++ writes std::mt19937_64 as its 312 state words and the position in them.
bool valid_rng_state(const std::string& text, std::string& why) {
  std::istringstream tokens(text);
  std::vector<std::string> words;
  for (std::string w; tokens >> w;) {
    if (w.find_first_not_of("0123456789") != std::string::npos) {
      why = "expected decimal integers separated by spaces, got '" + w.substr(0, 24) + "'";
      return false;
    }
    words.push_back(w);
  }
#if defined(__GLIBCXX__)
  constexpr size_t kWords = std::mt19937_64::state_size + 1;
  if (words.size() != kWords) {
    why = "expected " + std::to_string(kWords) + " integers (std::mt19937_64's state), got " +
          std::to_string(words.size());
    return false;
  }
  if (words.back().size() > 3 || std::stoul(words.back()) > std::mt19937_64::state_size) {
    why = "position " + words.back().substr(0, 24) + " is past the state's " +
          std::to_string(std::mt19937_64::state_size) + " words";
    return false;
  }
#endif
  std::istringstream is(text);
  std::mt19937_64 g;
  is >> g;
  if (is.fail()) {
    why = "does not parse as std::mt19937_64's state (a word out of range?)";
    return false;
  }
  return true;
}

void check_scaler(const std::map<std::string, double>& sc, Problems& p) {
  if (sc.empty()) return;  // a preset without loss scaling
  auto field = [](const char* key) { return std::string("metadata key 'scaler', entry '") + key + "'"; };
  auto get = [&](const char* key, bool required) -> const double* {
    auto it = sc.find(key);
    if (it != sc.end()) return &it->second;
    if (required) p.add(field(key), "missing (GradScaler state needs it)");
    return nullptr;
  };
  auto integer_in = [&](const char* key, const double* v, double lo, double hi, const std::string& range) {
    if (v && !(std::isfinite(*v) && *v == std::floor(*v) && *v >= lo && *v <= hi))
      p.add(field(key), "expected an integer in " + range + ", got " + number(*v));
  };
  if (const double* v = get("scale", true); v && !(std::isfinite(*v) && *v > 0 &&
                                                   *v <= double(std::numeric_limits<float>::max())))
    p.add(field("scale"), "expected a finite number in (0, " + number(std::numeric_limits<float>::max()) +
                              "] (the scale is a float32), got " + number(*v));
  if (const double* v = get("growth_factor", true); v && !(std::isfinite(*v) && *v > 1))
    p.add(field("growth_factor"), "expected a finite number > 1, got " + number(*v));
  if (const double* v = get("backoff_factor", true); v && !(*v > 0 && *v < 1))
    p.add(field("backoff_factor"), "expected a number in (0, 1), got " + number(*v));
  const double* interval = get("growth_interval", true);
  integer_in("growth_interval", interval, 1, kMaxCount, "[1, 2^53]");
  const bool interval_ok = interval && std::isfinite(*interval) && *interval == std::floor(*interval) &&
                           *interval >= 1 && *interval <= kMaxCount;
  // The tracker counts clean steps since the last change and resets when it reaches the interval.
  integer_in("_growth_tracker", get("_growth_tracker", true), 0, interval_ok ? *interval - 1 : kMaxCount,
             interval_ok ? "[0, growth_interval - 1 = " + number(*interval - 1) + "]" : "[0, 2^53]");
  // Overflows still tolerated before the next backoff: reset to hysteresis (>= 1), never 0.
  integer_in("_hysteresis_tracker", get("_hysteresis_tracker", false), 1, kMaxCount, "[1, 2^53]");
  integer_in("applied_steps", get("applied_steps", false), 0, kMaxCount, "[0, 2^53]");
  integer_in("skipped_steps", get("skipped_steps", false), 0, kMaxCount, "[0, 2^53]");
}

}  // namespace

std::string NonFiniteReport::describe() const {
  std::string s = "tensor '" + first_tensor + "' holds " + std::to_string(first_count) + " inf/NaN value" +
                  (first_count == 1 ? "" : "s") + " (first: " + number(first_value) + " at flat index " +
                  std::to_string(first_index) + ")";
  if (tensors > 1) s += "; " + std::to_string(tensors) + " tensors, " + std::to_string(values) + " values in all";
  return s;
}

std::optional<NonFiniteReport> find_nonfinite(const TrainingState& state) {
  std::optional<NonFiniteReport> report;
  for (const auto& [name, t] : state.model) scan(name, t, report);
  for (const auto& [name, t] : state.masters) scan(kMasterPrefix + name, t, report);
  for (const auto& [name, t] : state.optimizer) scan(kOptimizerPrefix + name, t, report);
  return report;
}

Status check_resumable(const TrainingState& st, const std::string& file) {
  Problems p(file);
  check_scaler(st.scaler, p);
  const std::pair<const char*, int64_t> counters[] = {{"optimizer_steps", st.optimizer_steps},
                                                      {"epoch", st.epoch},
                                                      {"batch_in_epoch", st.batch_in_epoch},
                                                      {"global_step", st.global_step}};
  for (const auto& [key, v] : counters)
    if (v < 0 || double(v) > kMaxCount)
      p.add(std::string("metadata key '") + key + "'", "expected an integer in [0, 2^53], got " + std::to_string(v));
  if (st.optimizer_steps > st.global_step)
    p.add("metadata key 'optimizer_steps'", std::to_string(st.optimizer_steps) + " is more than global_step " +
                                                std::to_string(st.global_step) +
                                                " (at most one optimizer step per training step)");
  if (std::string why; !valid_rng_state(st.rng_state, why)) p.add("metadata key 'rng_state'", why);
  return p.status();
}

StatusOr<TrainingState> load_usable_checkpoint(const std::string& file) {
  auto st = load_checkpoint(file);
  if (!st.is_ok()) return st.status();
  if (Status s = check_resumable(*st, file); !s.is_ok()) return Status(StatusCode::bad_checkpoint, s.message());
  if (auto bad = find_nonfinite(*st))
    return Status(StatusCode::bad_checkpoint,
                  "checkpoint '" + file + "' holds inf/NaN: " + bad->describe() +
                      " (a resume or rollback never continues from a non-finite state)");
  return st;
}

}  // namespace mixprec
