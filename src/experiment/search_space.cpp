// search_space.cpp: the points the grid and random searchers take (experiment.h), and a
// trial's configuration made from them. Pure functions: the same file, seed and index give
// the same trial on any machine, so a resumed or rerun sweep draws the trials it drew before.
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "mixprec/experiment/experiment.h"

namespace mixprec::experiment {
namespace {

using nlohmann::json;

// SplitMix64 (Steele, Lea, Flood 2014): a fixed bijective mixer, unlike std's
// distributions, whose outputs differ between standard libraries.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) for (seed, trial, hyperparameter): 53 random bits.
double unit(uint64_t seed, int64_t index, size_t which) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ uint64_t(index)) ^ uint64_t(which));
  return double(h >> 11) * 0x1.0p-53;
}

std::string int_text(double v) { return json(int64_t(v)).dump(); }
std::string double_text(double v) { return json(v).dump(); }  // shortest text that reads back as v

}  // namespace

std::vector<std::string> grid_values(const Hyperparameter& h) {
  using K = Hyperparameter::Kind;
  if (h.kind == K::constant || h.kind == K::categorical) return h.values;
  const int64_t n = std::max<int64_t>(h.count, 1);
  std::vector<std::string> out;
  std::set<int64_t> seen;
  for (int64_t i = 0; i < n; ++i) {
    const double t = n == 1 ? 0.0 : double(i) / double(n - 1);
    // The ends exactly: min and max are points of every grid of two or more.
    double v = h.kind == K::log_range ? std::exp(std::log(h.min) + t * (std::log(h.max) - std::log(h.min)))
                                      : h.min + t * (h.max - h.min);
    if (i == 0) v = h.min;
    if (i == n - 1 && n > 1) v = h.max;
    if (h.kind == K::int_range) {
      const int64_t k = int64_t(std::llround(v));
      if (seen.insert(k).second) out.push_back(int_text(double(k)));
    } else {
      out.push_back(double_text(v));
    }
  }
  return out;
}

std::vector<Assignment> grid_points(const std::vector<Hyperparameter>& hs) {
  std::vector<Assignment> points = {{}};
  for (const Hyperparameter& h : hs) {
    std::vector<Assignment> next;
    for (const Assignment& prefix : points)
      for (const std::string& v : grid_values(h)) {
        next.push_back(prefix);
        next.back().emplace_back(h.name, v);
      }
    points = std::move(next);
  }
  return points;
}

Assignment random_point(const std::vector<Hyperparameter>& hs, uint64_t seed, int64_t index) {
  using K = Hyperparameter::Kind;
  Assignment out;
  for (size_t j = 0; j < hs.size(); ++j) {
    const Hyperparameter& h = hs[j];
    const double u = unit(seed, index, j);
    std::string v;
    switch (h.kind) {
      case K::constant: v = h.values.front(); break;
      case K::categorical: v = h.values[std::min(h.values.size() - 1, size_t(u * double(h.values.size())))]; break;
      case K::int_range: {
        // Each of the max - min + 1 integers equally likely.
        const double span = h.max - h.min + 1.0;
        v = int_text(std::min(h.max, h.min + std::floor(u * span)));
        break;
      }
      case K::double_range: v = double_text(std::min(h.max, h.min + u * (h.max - h.min))); break;
      case K::log_range:
        v = double_text(std::clamp(std::exp(std::log(h.min) + u * (std::log(h.max) - std::log(h.min))), h.min, h.max));
        break;
    }
    out.emplace_back(h.name, v);
  }
  return out;
}

StatusOr<std::string> trial_config_json(const ExperimentSpec& spec, const Assignment& values) {
  json config = json::parse(spec.base_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return Status::internal("experiment base is not a JSON object");
  for (const auto& [name, text] : values) {
    json v = json::parse(text, nullptr, false);
    if (v.is_discarded()) return Status::invalid_argument("hyperparameter '" + name + "': value " + text + " is not JSON");
    config[name] = std::move(v);
  }
  return config.dump(2);
}

}  // namespace mixprec::experiment
