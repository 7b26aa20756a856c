// names.h: "did you mean ...?" for everything a user names: subcommands, flags, presets,
// models, datasets, a model's parameters. One edit distance serves the library's messages
// and the CLI's.
#pragma once
#include <string>
#include <vector>

namespace mixprec {

// The candidate closest to `given` (case-insensitive edit distance with transpositions; a
// unique prefix also counts), or "" when none is close enough to be a plausible typo (more
// than a third of the word, or 3 edits, wrong).
std::string closest_name(const std::string& given, const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& given, const std::vector<std::string>& candidates);

}  // namespace mixprec
