// core/names.cpp: see mixprec/core/names.h.
#include "mixprec/core/names.h"

#include <algorithm>
#include <cctype>

namespace mixprec {

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

}  // namespace mixprec
