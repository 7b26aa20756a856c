// yaml_json.h: YAML text as the JSON value it denotes (yaml-cpp parses; we convert), so that
// every YAML file mixprec reads (--config run.yaml) goes through the same JSON handling and
// checks as its JSON twin.
#pragma once
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mixprec/core/status.h"

namespace mixprec::io {

// Plain scalars become null (~, null, empty), booleans (true/false), integers or floats when
// they read as one, else strings; quoted scalars are always strings. Mappings need string
// keys. Refused with invalid_argument naming source:line:column: a syntax error, a second
// document, nesting deeper than kMaxJsonDepth, or more than 100,000 values once aliases are
// expanded (a YAML "billion laughs" file is small but expands exponentially).
// `positions`, when given, receives "source:line:column" of every value by its JSON pointer
// ("/layers/3/conv2d/kernel"), so later checks of the JSON can point into the file. JSON text
// is YAML too (its flow style), so a .json file read this way gets positions as well.
using Positions = std::map<std::string, std::string>;
StatusOr<nlohmann::json> yaml_to_json(std::string_view text, const std::string& source, Positions* positions = nullptr);

}  // namespace mixprec::io
