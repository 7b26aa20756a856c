// suggest.h: "did you mean ...?" for everything a user types by name: subcommands, flags,
// precision presets, models, datasets. CLI11 has no suggestions of its own, so one edit
// distance serves them all.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace mixprec::cli {

// The candidate closest to `given` (case-insensitive edit distance, a unique prefix also
// counts), or "" when none is close enough to be a plausible typo.
std::string closest_name(const std::string& given, const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& given, const std::vector<std::string>& candidates);
// A flag validator accepting exactly `names`; otherwise "expected one of: a, b, c; got 'x'
// (did you mean 'b'?)".
CLI::Validator one_of(const std::vector<std::string>& names);
// Validates --precision with amp::preset_by_name; unknown names get a suggestion among the
// presets and their aliases.
CLI::Validator precision_name();
// After a parse error: a better message when argv holds an unknown subcommand or flag
// ("unknown flag '--epoch' for 'mixprec train' (did you mean '--epochs'?)"), or "".
std::string explain_parse_error(CLI::App& app, int argc, char** argv);

}  // namespace mixprec::cli
