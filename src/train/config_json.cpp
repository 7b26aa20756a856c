// config_json.cpp: the run configuration as JSON, one table of fields for both directions.
#include "train/config_json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "io/json_limits.h"

namespace mixprec::train {

namespace {

// Applies f(name, field) to every serialised field of the config.
template <typename Config, typename F>
void for_each_field(Config& c, F&& f) {
  f("model", c.model);
  f("dataset", c.dataset);
  f("data_dir", c.data_dir);
  f("precision", c.precision);
  f("epochs", c.epochs);
  f("max_steps", c.max_steps);
  f("batch_size", c.batch_size);
  f("lr", c.lr);
  f("optimizer", c.optimizer);
  f("momentum", c.momentum);
  f("weight_decay", c.weight_decay);
  f("seed", c.seed);
  f("threads", c.threads);
  f("train_subset", c.train_subset);
  f("test_subset", c.test_subset);
  f("shuffle", c.shuffle);
  f("evaluate", c.evaluate);
  f("init_scale", c.init_scale);
  f("growth_factor", c.growth_factor);
  f("backoff_factor", c.backoff_factor);
  f("growth_interval", c.growth_interval);
  f("hysteresis", c.hysteresis);
  f("min_scale", c.min_scale);
  f("clip_grad_norm", c.clip_grad_norm);
  f("accumulate", c.accumulate);
  f("eval_every", c.eval_every);
  f("save_every", c.save_every);
  f("loss_spike_factor", c.loss_spike_factor);
  f("on_divergence", c.on_divergence);
  f("max_rollbacks", c.max_rollbacks);
  f("norm_mean", c.norm_mean);
  f("norm_std", c.norm_std);
}

}  // namespace

std::string config_to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for_each_field(config, [&](const char* name, const auto& v) { j[name] = v; });
  return j.dump(2);
}

namespace {

// Whether JSON number v fits integer type T. nlohmann's get<T>() static_casts a double, which
// is undefined behaviour out of range ("epochs": 1e300 was a fuzz crash under UBSan).
template <typename T>
bool fits(const nlohmann::json& v) {
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(L::max());
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (!L::is_signed) return i >= 0;
    return i >= int64_t(L::min()) && i <= int64_t(L::max());
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    const double bound = std::ldexp(1.0, L::digits);  // 2^63 for int64: max + 1, exactly
    return std::isfinite(d) && d == std::trunc(d) && d < bound && d >= (L::is_signed ? -bound : 0.0);
  }
  return true;  // not a number: get<T>() throws, reported as the wrong type below
}

// Overwrites the fields of c present in j.
Status apply_json(TrainConfig& c, const nlohmann::json& j) {
  Status error;
  for_each_field(c, [&](const char* name, auto& field) {
    if (!error.is_ok() || !j.contains(name)) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!fits<T>(j[name])) {
        error = Status::invalid_argument(std::string("configuration: field '") + name + "' is " +
                                         j[name].dump().substr(0, 80) + ", expected an integer in [" +
                                         std::to_string(std::numeric_limits<T>::min()) + ", " +
                                         std::to_string(std::numeric_limits<T>::max()) + "]");
        return;
      }
    }
    try {
      field = j[name].get<std::decay_t<decltype(field)>>();
    } catch (const nlohmann::json::exception&) {
      error = Status::invalid_argument(std::string("configuration: field '") + name + "' has the wrong type (" +
                                       j[name].dump().substr(0, 80) + ")");
    }
  });
  return error;
}

}  // namespace

// Deeper JSON would overflow the stack when a value is copied or printed (io/json_limits.h).
static Status check_depth(const std::string& text) {
  if (io::json_depth_within(text)) return Status::ok();
  return Status::invalid_argument("configuration: JSON nested deeper than " +
                                  std::to_string(io::kMaxJsonDepth) +
                                  " levels, expected a flat object of settings");
}

StatusOr<TrainConfig> config_from_json(const std::string& text) {
  MIXPREC_RETURN_IF_ERROR(check_depth(text));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::invalid_argument("configuration: not a JSON object");
  TrainConfig c;
  MIXPREC_RETURN_IF_ERROR(apply_json(c, j));
  return c;
}

StatusOr<TrainConfig> adopt_saved_config(const TrainConfig& given, const std::string& saved,
                                         const std::function<bool(const std::string& key)>& explicitly_given) {
  MIXPREC_RETURN_IF_ERROR(check_depth(saved));
  auto j = nlohmann::json::parse(saved, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::invalid_argument("configuration: not a JSON object");
  nlohmann::json keep = nlohmann::json::object();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!explicitly_given(it.key())) keep[it.key()] = it.value();
  TrainConfig c = given;
  MIXPREC_RETURN_IF_ERROR(apply_json(c, keep));
  return c;
}

}  // namespace mixprec::train
