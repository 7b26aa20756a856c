// suggest.cpp: see suggest.h.
#include "suggest.h"

#include <algorithm>
#include <cctype>

#include "mixprec/precision.h"

namespace mixprec::cli {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Levenshtein distance with adjacent transpositions counted as one edit ("epcohs").
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string closest_name(const std::string& given, const std::vector<std::string>& candidates) {
  const std::string g = lower(given);
  if (g.empty()) return "";
  // A unique prefix ("trans" -> "transformer") is what the user meant.
  std::vector<std::string> prefixed;
  for (const auto& c : candidates)
    if (lower(c).rfind(g, 0) == 0) prefixed.push_back(c);
  if (prefixed.size() == 1) return prefixed.front();
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(g, lower(c));
    if (d < best_d) best_d = d, best = c;
  }
  // Up to a third of the word may be wrong (at least 1, at most 3 edits): "epoch" ->
  // "epochs", "bfloat16" -> "bf16" is too far, "resnet" -> "mlp" is not offered.
  const size_t limit = std::clamp<size_t>(g.size() / 3, 1, 3);
  return best_d <= limit ? best : "";
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(given, candidates);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

CLI::Validator one_of(const std::vector<std::string>& names) {
  return CLI::Validator(
      [names](std::string& value) -> std::string {
        if (std::find(names.begin(), names.end(), value) != names.end()) return "";
        return "expected one of: " + join(names) + "; got '" + value + "'" + did_you_mean(value, names);
      },
      "{" + join(names) + "}");
}

CLI::Validator precision_name() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto p = amp::preset_by_name(value);
        if (p.is_ok()) return "";
        std::vector<std::string> names;
        for (const auto& preset : amp::all_presets()) names.push_back(preset.name);
        for (const auto& [alias, target] : amp::preset_aliases()) names.push_back(alias);
        return p.status().message() + did_you_mean(value, names);
      },
      "PRESET");
}

std::string explain_parse_error(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  if (argc < 2) return "";
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-') return "";
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands({}))
    if (s->get_name() == first) sub = s;
  if (!sub)
    return "unknown command '" + first + "'" + did_you_mean(first, commands) + "; commands: " + join(commands);
  std::vector<std::string> flags;
  for (const CLI::Option* o : sub->get_options()) {
    for (const auto& l : o->get_lnames()) flags.push_back("--" + l);
    for (const auto& s : o->get_snames()) flags.push_back("-" + s);
  }
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (arg[1] != '-' && std::isdigit(static_cast<unsigned char>(arg[1]))) continue;  // "-1"
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) continue;
    return "unknown flag '" + name + "' for 'mixprec " + sub->get_name() + "'" + did_you_mean(name, flags);
  }
  return "";
}

}  // namespace mixprec::cli
