// suggest.h: "did you mean ...?" for everything a user types by name: subcommands, flags,
// precision presets, models, datasets. CLI11 has no suggestions of its own, so one edit
// distance serves them all.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "mixprec/core/names.h"

namespace mixprec::cli {

using mixprec::closest_name;  // mixprec/core/names.h
using mixprec::did_you_mean;
// A flag validator accepting exactly `names`; otherwise "expected one of: a, b, c; got 'x'
// (did you mean 'b'?)".
CLI::Validator one_of(const std::vector<std::string>& names);
// one_of(names), or a model file (model_file.h: a name ending in .yaml, .yml or .json).
CLI::Validator model_name(const std::vector<std::string>& names);
// Validates --precision with amp::preset_by_name; unknown names get a suggestion among the
// presets and their aliases.
CLI::Validator precision_name();
// A precision for predict/serve: fp32|bf16|fp16 (infer::inference_preset_name) or a preset name.
CLI::Validator inference_precision();
// After a parse error: a better message when argv holds an unknown subcommand or flag
// ("unknown flag '--epoch' for 'mixprec train' (did you mean '--epochs'?)"), or "".
std::string explain_parse_error(CLI::App& app, int argc, char** argv);

}  // namespace mixprec::cli
