// file_reader.h: reading the experiment file's JSON (converted from YAML with each value's
// file:line:column), shared by the parser of the file (experiment_file.cpp) and of its
// searcher (searcher_file.cpp). Every refusal names the position, the key and what was
// expected.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/yaml_json.h"
#include "mixprec/experiment/experiment.h"
#include "mixprec/core/names.h"

namespace mixprec::experiment {

using nlohmann::json;

struct Reader {
  const std::string& source;
  io::Positions positions;

  // "exp.yaml:7:3" of the value at pointer (or of its nearest enclosing value).
  std::string at(std::string pointer) const {
    for (;;) {
      if (auto it = positions.find(pointer); it != positions.end()) return it->second;
      if (pointer.empty()) return source;
      pointer = pointer.substr(0, pointer.rfind('/'));
    }
  }
  Status error(const std::string& pointer, const std::string& key, const std::string& what) const {
    return Status::invalid_argument(at(pointer) + ": " + key + ": " + what);
  }
  Status unknown_keys(const json& object, const std::string& pointer, const std::string& prefix,
                      const std::vector<std::string>& known) const {
    for (auto it = object.begin(); it != object.end(); ++it) {
      bool ok = false;
      for (const std::string& k : known) ok = ok || k == it.key();
      if (!ok) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        return error(pointer + "/" + it.key(), prefix + it.key(),
                     "unknown key" + did_you_mean(it.key(), known) + "; the keys here are: " + list);
      }
    }
    return Status::ok();
  }
  // An integer in [lo, hi] at object[key] (absent: fallback).
  StatusOr<int64_t> integer(const json& object, const std::string& pointer, const std::string& key,
                            const std::string& name, int64_t lo, int64_t hi, int64_t fallback) const {
    if (!object.contains(key)) return fallback;
    const json& v = object[key];
    const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                    v.get<double>() == std::trunc(v.get<double>()) &&
                                                    std::fabs(v.get<double>()) < 9e15);
    const double d = v.is_number() ? v.get<double>() : 0.0;
    if (!integral || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) || d < double(lo) ||
        d > double(hi))
      return error(pointer + "/" + key, name,
                   "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                       v.dump().substr(0, 60));
    return v.is_number_integer() ? v.get<int64_t>() : int64_t(d);
  }
  StatusOr<double> number(const json& object, const std::string& pointer, const std::string& key,
                          const std::string& name) const {
    const json& v = object[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return error(pointer + "/" + key, name, "expected a finite number, got " + v.dump().substr(0, 60));
    return v.get<double>();
  }
  StatusOr<bool> boolean(const json& object, const std::string& pointer, const std::string& key,
                         const std::string& name, bool fallback) const {
    if (!object.contains(key)) return fallback;
    if (!object[key].is_boolean())
      return error(pointer + "/" + key, name, "expected true or false, got " + object[key].dump().substr(0, 60));
    return object[key].get<bool>();
  }
};


// Reads doc["searcher"] into spec.searcher (rung steps included); spec.max_steps is the
// experiment's per-trial budget, read before.
Status read_searcher(const Reader& r, const json& doc, ExperimentSpec& spec);

}  // namespace mixprec::experiment
