// experiment_file.cpp: the experiment file (experiment.h, docs/experiments.md) read into an
// ExperimentSpec. The YAML becomes JSON with each value's file:line:column (io/yaml_json.h),
// so every refusal points at the value it refuses. Hyperparameter values are checked by the
// same table and checks as a --config file (train_config.h), against the base they extend,
// so a trial the sweep would start is one `mixprec train` accepts.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "experiment/file_reader.h"
#include "io/yaml_json.h"
#include "mixprec/experiment/experiment.h"
#include "mixprec/io/files.h"
#include "mixprec/core/names.h"
#include "mixprec/train/train_config.h"

namespace mixprec::experiment {
namespace {

using nlohmann::json;

// Settings the sweep decides for every trial: not a hyperparameter nor part of the base.
const char* const kSweepOwned[] = {"max_steps"};

// (line, column) of "file:line:column" ((0, 0) without a position).
std::pair<long, long> line_column(const std::string& where) {
  const auto c2 = where.rfind(':');
  if (c2 == std::string::npos || c2 == 0) return {0, 0};
  const auto c1 = where.rfind(':', c2 - 1);
  if (c1 == std::string::npos) return {0, 0};
  return {std::atol(where.c_str() + c1 + 1), std::atol(where.c_str() + c2 + 1)};
}

// The keys a configuration file holds (saved settings), for "did you mean".
std::vector<std::string> setting_keys() {
  std::vector<std::string> keys;
  for (const train::ConfigField& f : train::config_fields())
    if (f.saved) keys.push_back(f.key);
  return keys;
}

bool is_integer_field(const train::ConfigField& f) {
  return !std::holds_alternative<double train::TrainConfig::*>(f.member) &&
         (std::holds_alternative<int64_t train::TrainConfig::*>(f.member) ||
          std::holds_alternative<uint64_t train::TrainConfig::*>(f.member) ||
          std::holds_alternative<int train::TrainConfig::*>(f.member));
}
bool is_number_field(const train::ConfigField& f) {
  return is_integer_field(f) || std::holds_alternative<double train::TrainConfig::*>(f.member);
}

// A key of the base or of the hyperparameters: a setting, and not one the sweep owns.
Status check_setting_key(const Reader& r, const std::string& pointer, const std::string& where,
                         const std::string& key) {
  const train::ConfigField* f = train::find_config_field(key);
  if (f == nullptr || !f->saved)
    return r.error(pointer, where + key,
                   "not a setting" + did_you_mean(key, setting_keys()) +
                       " (the keys are config.json's: a `mixprec train` flag's name with _ for -)");
  for (const char* owned : kSweepOwned)
    if (key == owned)
      return r.error(pointer, where + key,
                     "the sweep sets it for each trial: give the per-trial budget as the experiment's max_steps "
                     "(or the searcher's rungs)");
  return Status::ok();
}

// One value of setting `key` on top of the base, through --config's checks and the field's
// range and choices: what `mixprec train` would say of it.
Status check_value(const Reader& r, const train::TrainConfig& base, const std::string& pointer,
                   const std::string& name, const std::string& key, const json& value) {
  auto c = train::apply_config_file(base, json{{key, value}}.dump(), r.at(pointer) + ": " + name,
                                    [](const std::string&) { return false; }, /*in_user_file=*/false);
  if (!c.is_ok()) return c.status();
  const std::string problem = train::check_field(*train::find_config_field(key), *c);
  if (!problem.empty()) return r.error(pointer, name, problem);
  return Status::ok();
}

StatusOr<Hyperparameter> read_hyperparameter(const Reader& r, const train::TrainConfig& base, const std::string& key,
                                             const json& v) {
  const std::string ptr = "/hyperparameters/" + key, name = "hyperparameters." + key;
  MIXPREC_RETURN_IF_ERROR(check_setting_key(r, ptr, "hyperparameters.", key));
  // The sweep passes --threads to every trial (a value here would be overridden), and compares
  // trials by their evaluation (a trial without one could never be ranked).
  if (key == "threads")
    return r.error(ptr, name, "the sweep divides the cores among the trials (mixprec sweep --cores; base's threads "
                              "is an upper bound): not a hyperparameter");
  if (key == "evaluate") return r.error(ptr, name, "trials are compared by their evaluation: not a hyperparameter");
  const train::ConfigField& field = *train::find_config_field(key);
  Hyperparameter h;
  h.name = key;
  h.where = r.at(ptr);
  if (v.is_array())
    return r.error(ptr, name, "a list: give the choices as {type: categorical, values: [...]}, or one value");
  if (!v.is_object()) {  // a constant
    MIXPREC_RETURN_IF_ERROR(check_value(r, base, ptr, name, key, v));
    h.values = {v.dump()};
    return h;
  }
  if (!v.contains("type") || !v["type"].is_string())
    return r.error(ptr, name,
                   "expected a value (a constant) or a mapping with type: int, double, log or categorical");
  const std::string type = v["type"].get<std::string>();
  const std::vector<std::string> types = {"int", "double", "log", "categorical"};
  if (type == "categorical") {
    MIXPREC_RETURN_IF_ERROR(r.unknown_keys(v, ptr, name + ".", {"type", "values"}));
    if (!v.contains("values") || !v["values"].is_array() || v["values"].empty())
      return r.error(ptr + "/values", name + ".values", "expected a non-empty list of values");
    h.kind = Hyperparameter::Kind::categorical;
    for (size_t i = 0; i < v["values"].size(); ++i) {
      const std::string p = ptr + "/values/" + std::to_string(i);
      MIXPREC_RETURN_IF_ERROR(check_value(r, base, p, name + ".values[" + std::to_string(i) + "]", key, v["values"][i]));
      h.values.push_back(v["values"][i].dump());
    }
    return h;
  }
  if (type != "int" && type != "double" && type != "log")
    return r.error(ptr + "/type", name + ".type",
                   "expected int, double, log or categorical, got '" + type + "'" + did_you_mean(type, types));
  MIXPREC_RETURN_IF_ERROR(r.unknown_keys(v, ptr, name + ".", {"type", "min", "max", "count"}));
  if (!is_number_field(field))
    return r.error(ptr + "/type", name + ".type",
                   "'" + key + "' is not a number: give it as a constant or {type: categorical, values: [...]}");
  if (type != "int" && is_integer_field(field))
    return r.error(ptr + "/type", name + ".type", "'" + key + "' takes integers: use type: int");
  for (const char* bound : {"min", "max"})
    if (!v.contains(bound)) return r.error(ptr, name, std::string("missing '") + bound + "'");
  h.kind = type == "int" ? Hyperparameter::Kind::int_range
           : type == "log" ? Hyperparameter::Kind::log_range : Hyperparameter::Kind::double_range;
  if (type == "int") {
    constexpr int64_t big = int64_t(1) << 53;  // exact in a double
    auto lo = r.integer(v, ptr, "min", name + ".min", -big, big, 0);
    auto hi = r.integer(v, ptr, "max", name + ".max", -big, big, 0);
    if (!lo.is_ok()) return lo.status();
    if (!hi.is_ok()) return hi.status();
    h.min = double(*lo), h.max = double(*hi);
  } else {
    auto lo = r.number(v, ptr, "min", name + ".min");
    auto hi = r.number(v, ptr, "max", name + ".max");
    if (!lo.is_ok()) return lo.status();
    if (!hi.is_ok()) return hi.status();
    h.min = *lo, h.max = *hi;
  }
  if (h.min > h.max) return r.error(ptr + "/max", name + ".max", "must be >= min (" + train::number_text(h.min) + ")");
  if (type == "log" && !(h.min > 0))
    return r.error(ptr + "/min", name + ".min", "a log range needs min > 0, got " + train::number_text(h.min));
  auto count = r.integer(v, ptr, "count", name + ".count", 1, 10000, 0);
  if (!count.is_ok()) return count.status();
  h.count = *count;
  MIXPREC_RETURN_IF_ERROR(check_value(r, base, ptr + "/min", name + ".min", key, v["min"]));
  MIXPREC_RETURN_IF_ERROR(check_value(r, base, ptr + "/max", name + ".max", key, v["max"]));
  return h;
}

// The base configuration: the recipe's settings, then base's own keys over them.
StatusOr<json> read_base(const Reader& r, const json& doc, const RecipeReader& read_recipe) {
  json merged = json::object();
  if (!doc.contains("base")) return merged;
  const json& base = doc["base"];
  if (!base.is_object()) return r.error("/base", "base", "expected a mapping of settings (and optionally recipe: FILE)");
  if (base.contains("recipe")) {
    if (!base["recipe"].is_string() || base["recipe"].get<std::string>().empty())
      return r.error("/base/recipe", "base.recipe", "expected the path of a recipe file (YAML or JSON)");
    const std::string path = base["recipe"].get<std::string>();
    if (!read_recipe) return r.error("/base/recipe", "base.recipe", "recipes cannot be read here");
    auto text = read_recipe(path);
    if (!text.is_ok()) return r.error("/base/recipe", "base.recipe", text.status().message());
    // The recipe as `mixprec train --config` reads it: every key a setting, each value checked.
    auto checked = train::apply_config_file(train::TrainConfig{}, *text, path, [](const std::string&) { return false; });
    if (!checked.is_ok()) return r.error("/base/recipe", "base.recipe", checked.status().message());
    auto recipe = io::yaml_to_json(*text, path);
    if (!recipe.is_ok()) return recipe.status();
    if (recipe->is_object()) merged = *recipe;
  }
  for (auto it = base.begin(); it != base.end(); ++it) {
    if (it.key() == "recipe") continue;
    MIXPREC_RETURN_IF_ERROR(check_setting_key(r, "/base/" + it.key(), "base.", it.key()));
    merged[it.key()] = it.value();
  }
  for (const char* owned : kSweepOwned)
    if (merged.contains(owned))
      return r.error("/base/recipe", std::string("base.recipe: ") + owned,
                     "the sweep sets it for each trial: give the per-trial budget as the experiment's max_steps");
  return merged;
}

}  // namespace

StatusOr<ExperimentSpec> parse_experiment(std::string_view text, const std::string& source,
                                          const RecipeReader& read_recipe) {
  Reader r{source, {}};
  auto parsed = io::yaml_to_json(text, source, &r.positions);
  if (!parsed.is_ok()) return parsed.status();
  const json& doc = *parsed;
  if (!doc.is_object())
    return Status::invalid_argument(source + ": expected a mapping (name:, base:, hyperparameters:, searcher:, ...), got " +
                                    std::string(doc.type_name()));
  MIXPREC_RETURN_IF_ERROR(r.unknown_keys(doc, "", "",
                                         {"name", "base", "hyperparameters", "searcher", "max_concurrent_trials",
                                          "ranks_per_trial", "metric", "smaller_is_better", "max_steps", "max_seconds", "max_restarts",
                                          "keep_checkpoints"}));
  ExperimentSpec spec;
  spec.source = source;
  if (!doc.contains("name") || !doc["name"].is_string())
    return r.error("/name", "name", "expected the experiment's name (letters, digits, '.', '_', '-'), e.g. name: lr-sweep");
  spec.name = doc["name"].get<std::string>();
  bool name_ok = !spec.name.empty() && spec.name.size() <= 100 && spec.name != "." && spec.name != "..";
  for (char c : spec.name) name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!name_ok)
    return r.error("/name", "name", "expected 1 to 100 letters, digits, '.', '_' or '-' (it names the experiment's "
                                    "folder), got '" + spec.name.substr(0, 100) + "'");
  auto base = read_base(r, doc, read_recipe);
  if (!base.is_ok()) return base.status();
  spec.base_json = base->dump();
  auto base_config = train::apply_config_file(train::TrainConfig{}, spec.base_json, source + ": base",
                                              [](const std::string&) { return false; }, /*in_user_file=*/false);
  if (!base_config.is_ok()) return base_config.status();
  for (const train::ConfigField& f : train::config_fields())
    if (base->contains(f.key))
      if (std::string problem = train::check_field(f, *base_config); !problem.empty())
        return r.error("/base/" + f.key, "base." + f.key, problem);
  if (!base_config->evaluate)
    return r.error("/base/evaluate", "base.evaluate", "must be true: the searcher compares trials by their evaluation");
  if (doc.contains("hyperparameters")) {
    const json& hs = doc["hyperparameters"];
    if (!hs.is_object() && !hs.is_null())
      return r.error("/hyperparameters", "hyperparameters", "expected a mapping of setting: value or range");
    if (hs.is_object())
      for (auto it = hs.begin(); it != hs.end(); ++it) {
        auto h = read_hyperparameter(r, *base_config, it.key(), it.value());
        if (!h.is_ok()) return h.status();
        spec.hyperparameters.push_back(std::move(h).value());
      }
    // In the file's order (a JSON object's keys come sorted): the grid's order and the table's columns.
    std::stable_sort(spec.hyperparameters.begin(), spec.hyperparameters.end(),
                     [](const Hyperparameter& a, const Hyperparameter& b) { return line_column(a.where) < line_column(b.where); });
  }
  auto steps = r.integer(doc, "", "max_steps", "max_steps", 1, int64_t(1) << 40, -1);
  if (!steps.is_ok()) return steps.status();
  spec.max_steps = *steps;
  if (doc.contains("max_seconds")) {
    auto s = r.number(doc, "", "max_seconds", "max_seconds");
    if (!s.is_ok()) return s.status();
    if (!(*s > 0)) return r.error("/max_seconds", "max_seconds", "must be > 0 seconds");
    spec.max_seconds = *s;
  }
  auto concurrent = r.integer(doc, "", "max_concurrent_trials", "max_concurrent_trials", 1, 1024, 1);
  // Ranks beyond the cores the sweep may use are refused when it starts (run_sweep), where
  // the cores are known; 1024 bounds the argument vector of a typo.
  auto ranks = r.integer(doc, "", "ranks_per_trial", "ranks_per_trial", 1, 1024, 1);
  auto restarts = r.integer(doc, "", "max_restarts", "max_restarts", 0, 100, 0);
  auto keep = r.integer(doc, "", "keep_checkpoints", "keep_checkpoints", 1, 1000, 1);
  for (const auto* v : {&concurrent, &ranks, &restarts, &keep})
    if (!v->is_ok()) return v->status();
  spec.max_concurrent_trials = *concurrent, spec.max_restarts = *restarts, spec.keep_checkpoints = *keep;
  spec.ranks_per_trial = *ranks;
  const std::vector<std::string> metrics = {"accuracy", "loss"};
  if (doc.contains("metric")) {
    const json& m = doc["metric"];
    const std::string given = m.is_string() ? m.get<std::string>() : m.dump();
    if (!m.is_string() || (given != "accuracy" && given != "loss"))
      return r.error("/metric", "metric",
                     "expected accuracy or loss (fields of metrics.jsonl's eval records: test accuracy, validation "
                     "loss), got '" + given.substr(0, 60) + "'" + did_you_mean(given, metrics));
    spec.metric = given;
  }
  auto smaller = r.boolean(doc, "", "smaller_is_better", "smaller_is_better", spec.metric == "loss");
  if (!smaller.is_ok()) return smaller.status();
  spec.smaller_is_better = *smaller;
  MIXPREC_RETURN_IF_ERROR(read_searcher(r, doc, spec));
  return spec;
}

StatusOr<ExperimentSpec> load_experiment(const std::string& path) {
  auto text = io::read_regular_file(path, "experiment file", uint64_t(1) << 20);
  if (!text.is_ok()) return Status::invalid_argument(text.status().message());
  // A recipe's path is relative to the experiment file, as a YAML include would be.
  const auto slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  auto read = [&](const std::string& recipe) -> StatusOr<std::string> {
    const std::string file = !recipe.empty() && recipe[0] == '/' ? recipe : folder + recipe;
    return io::read_regular_file(file, "recipe", uint64_t(1) << 20);
  };
  return parse_experiment(*text, path, read);
}

}  // namespace mixprec::experiment
