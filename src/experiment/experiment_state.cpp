// experiment_state.cpp: the experiment as JSON (experiment.h): the canonical form of a spec,
// which a resume compares with the file it is given, and the state file a sweep rewrites
// after every change and a dashboard reads. Reading the state back checks every field, since
// a resume acts on it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "mixprec/experiment/experiment.h"

namespace mixprec::experiment {
namespace {

using nlohmann::json;

const char* kind_name(Hyperparameter::Kind k) {
  switch (k) {
    case Hyperparameter::Kind::constant: return "constant";
    case Hyperparameter::Kind::int_range: return "int";
    case Hyperparameter::Kind::double_range: return "double";
    case Hyperparameter::Kind::log_range: return "log";
    case Hyperparameter::Kind::categorical: return "categorical";
  }
  return "?";
}

const char* searcher_name(Searcher::Kind k) {
  return k == Searcher::Kind::grid ? "grid" : k == Searcher::Kind::random ? "random" : "asha";
}

// JSON has no NaN: a missing metric is null.
json metric_json(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

const std::vector<std::string> kStates = {"pending", "running", "paused", "completed", "stopped", "failed"};

}  // namespace

std::string spec_to_json(const ExperimentSpec& spec) {
  json hs = json::array();
  for (const Hyperparameter& h : spec.hyperparameters) {
    json values = json::array();
    for (const std::string& v : h.values) values.push_back(json::parse(v, nullptr, false));
    hs.push_back({{"name", h.name}, {"type", kind_name(h.kind)}, {"values", values}, {"min", h.min},
                  {"max", h.max}, {"count", h.count}});
  }
  const Searcher& s = spec.searcher;
  json out = json{{"name", spec.name},
              {"base", json::parse(spec.base_json, nullptr, false)},
              {"hyperparameters", hs},
              {"searcher",
               {{"name", searcher_name(s.kind)}, {"max_trials", s.max_trials}, {"seed", s.seed},
                {"reduction_factor", s.reduction_factor}, {"rung_steps", s.rung_steps}}},
              {"metric", spec.metric},
              {"smaller_is_better", spec.smaller_is_better},
              {"max_steps", spec.max_steps},
              {"max_seconds", spec.max_seconds},
              {"max_restarts", spec.max_restarts},
              {"keep_checkpoints", spec.keep_checkpoints}};
  // Only when not 1: the state files of sweeps from before the key still compare equal.
  if (spec.ranks_per_trial != 1) out["ranks_per_trial"] = spec.ranks_per_trial;
  return out.dump();
}

std::string state_to_json(const ExperimentState& state) {
  json trials = json::array();
  for (const TrialRecord& t : state.trials) {
    json hp = json::object(), metrics = json::array();
    for (const auto& [k, v] : t.hyperparameters) hp[k] = json::parse(v, nullptr, false);
    for (double m : t.metrics) metrics.push_back(metric_json(m));
    trials.push_back({{"id", t.id}, {"dir", t.dir}, {"hyperparameters", hp}, {"state", t.state},
                      {"target_rung", t.target_rung}, {"metrics", metrics}, {"steps", t.steps},
                      {"restarts", t.restarts}, {"seconds", t.seconds}, {"error", t.error}});
  }
  json spec = json::parse(state.spec_json, nullptr, false);
  return json{{"format", "mixprec-experiment"}, {"version", 1},     {"name", state.name},
              {"status", state.status},         {"experiment", spec}, {"trials", trials}}
             .dump(1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

StatusOr<ExperimentState> state_from_json(const std::string& text, const std::string& source) {
  const json j = json::parse(text, nullptr, false);
  auto bad = [&](const std::string& what) {
    return Status::data_loss("experiment state '" + source + "': " + what +
                             " (the file is damaged or not a sweep's; start the sweep afresh in another directory)");
  };
  // Not j.value("format", ""): it throws when the field is there but not a string.
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"] != "mixprec-experiment")
    return bad("not a mixprec experiment state");
  if (!j.contains("version") || j["version"] != 1) return bad("expected version 1");
  ExperimentState s;
  try {
    s.name = j.at("name").get<std::string>();
    s.status = j.at("status").get<std::string>();
    s.spec_json = j.at("experiment").dump();
    // Integers only as JSON integers: nlohmann's get<int64_t>() of a float like 1e300 is a cast
    // with undefined behaviour.
    auto integer = [&](const json& t, const char* key) -> int64_t {
      const json& v = t.at(key);
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
        throw std::invalid_argument(std::string("'") + key + "' is not an integer");
      return v.get<int64_t>();
    };
    int64_t index = 0;
    for (const json& t : j.at("trials")) {
      ++index;
      TrialRecord r;
      r.id = integer(t, "id");
      r.dir = t.at("dir").get<std::string>();
      if (r.id != index) return bad("trial " + std::to_string(index) + " has id " + std::to_string(r.id));
      // The directory is joined to the experiment's: only the name the sweep gives it.
      char expected[32];
      std::snprintf(expected, sizeof expected, "trial-%04lld", (long long)r.id);
      if (r.dir != expected) return bad("trial " + std::to_string(r.id) + ": dir must be '" + expected + "'");
      for (auto it = t.at("hyperparameters").begin(); it != t.at("hyperparameters").end(); ++it)
        r.hyperparameters.emplace_back(it.key(), it.value().dump());
      r.state = t.at("state").get<std::string>();
      if (std::find(kStates.begin(), kStates.end(), r.state) == kStates.end())
        return bad("trial " + std::to_string(r.id) + ": unknown state '" + r.state + "'");
      const int64_t rung = integer(t, "target_rung");
      if (rung < 0 || rung > 64) return bad("trial " + std::to_string(r.id) + ": target_rung out of range");
      r.target_rung = int(rung);
      for (const json& m : t.at("metrics")) r.metrics.push_back(m.is_null() ? NAN : m.get<double>());
      r.steps = integer(t, "steps");
      r.restarts = integer(t, "restarts");
      r.seconds = t.at("seconds").get<double>();
      r.error = t.at("error").get<std::string>();
      if (r.steps < 0 || r.restarts < 0)
        return bad("trial " + std::to_string(r.id) + ": a counter out of range");
      s.trials.push_back(std::move(r));
    }
  } catch (const std::exception& e) {  // json::exception, or integer()'s
    return bad(std::string("a field is missing or has the wrong type: ") + e.what());
  }
  return s;
}

}  // namespace mixprec::experiment
