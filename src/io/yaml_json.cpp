// yaml_json.cpp: see yaml_json.h.
#include "io/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "io/json_limits.h"

namespace mixprec::io {
namespace {

// Far above any config or model file (a few hundred values); small enough that a file of
// nested aliases is refused in milliseconds.
constexpr int64_t kMaxValues = 100000;

std::string where(const std::string& source, const YAML::Mark& m) {
  if (m.is_null()) return source;
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// A plain scalar as YAML 1.2's core schema reads it.
nlohmann::json plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(begin, &end, 10);
  if (*end == '\0' && errno == 0) return int64_t(i);
  errno = 0;
  const double d = std::strtod(begin, &end);
  // Finite decimal numbers only: "inf"/"nan" stay text (the settings' checks name them).
  if (*end == '\0' && errno == 0 && std::isfinite(d) && (std::isdigit(static_cast<unsigned char>(s[0])) ||
                                                         s[0] == '-' || s[0] == '+' || s[0] == '.'))
    return d;
  return s;
}

// A key as a JSON pointer token (RFC 6901: ~ and / escaped).
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

struct Converter {
  const std::string& source;
  Positions* positions;
  int64_t values = 0;

  StatusOr<nlohmann::json> convert(const YAML::Node& n, size_t depth, const std::string& path) {
    if (positions != nullptr && !n.Mark().is_null()) (*positions)[path] = where(source, n.Mark());
    if (++values > kMaxValues)
      return Status::invalid_argument(where(source, n.Mark()) + ": more than " + std::to_string(kMaxValues) +
                                      " values once aliases are expanded");
    if (depth > kMaxJsonDepth)
      return Status::invalid_argument(where(source, n.Mark()) + ": nested deeper than " +
                                      std::to_string(kMaxJsonDepth) + " levels");
    switch (n.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined: return nlohmann::json(nullptr);
      case YAML::NodeType::Scalar:
        if (!is_valid_utf8(n.Scalar())) return Status::invalid_argument(where(source, n.Mark()) + ": not UTF-8 text");
        return n.Tag() == "!" ? nlohmann::json(n.Scalar()) : plain_scalar(n.Scalar());  // "!": quoted
      case YAML::NodeType::Sequence: {
        nlohmann::json a = nlohmann::json::array();
        size_t index = 0;
        for (const YAML::Node& item : n) {
          auto v = convert(item, depth + 1, positions ? path + "/" + std::to_string(index) : path);
          ++index;
          if (!v.is_ok()) return v.status();
          a.push_back(std::move(v).value());
        }
        return a;
      }
      case YAML::NodeType::Map: {
        nlohmann::json o = nlohmann::json::object();
        for (const auto& kv : n) {
          if (!kv.first.IsScalar())
            return Status::invalid_argument(where(source, kv.first.Mark()) + ": a key must be a plain name");
          const std::string key = kv.first.Scalar();
          if (!is_valid_utf8(key)) return Status::invalid_argument(where(source, kv.first.Mark()) + ": not UTF-8 text");
          if (o.contains(key))
            return Status::invalid_argument(where(source, kv.first.Mark()) + ": key '" + key + "' appears twice");
          auto v = convert(kv.second, depth + 1, positions ? path + "/" + pointer_token(key) : path);
          if (!v.is_ok()) return v.status();
          o[key] = std::move(v).value();
        }
        return o;
      }
    }
    return nlohmann::json(nullptr);
  }
};

// Where a second document starts: a "---" line after content (a "---" before any content
// only opens the first), or npos.
std::string_view::size_type second_document(std::string_view text) {
  bool content = false;
  std::string_view::size_type pos = 0;
  while (pos < text.size()) {
    std::string_view::size_type end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool marker = line == "---" || line.substr(0, 4) == "--- " || line.substr(0, 4) == "---\t";
    if (marker && content) return pos;
    const auto first = line.find_first_not_of(" \t");
    if (!marker && first != std::string_view::npos && line[first] != '#' && line.substr(0, 3) != "...") content = true;
    pos = end + 1;
  }
  return std::string_view::npos;
}

size_t line_of(std::string_view text, std::string_view::size_type at) {
  return size_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(at), '\n')) + 1;
}

}  // namespace

StatusOr<nlohmann::json> yaml_to_json(std::string_view text, const std::string& source, Positions* positions) {
  // YAML::Load, not LoadAll: Debian's yaml-cpp 0.7 LoadAll loops forever, allocating, on some
  // malformed input (yaml-cpp PR #1319; our model_file fuzz harness met it: 20 GB in 60 s).
  // Load reads the first document only, so a second one is found by its "---" line.
  if (std::string_view::size_type at = second_document(text); at != std::string_view::npos)
    return Status::invalid_argument(source + ":" + std::to_string(line_of(text, at)) +
                                    ": a second YAML document ('---'); expected one");
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(where(source, e.mark) + ": YAML: " + e.msg);
  }
  Converter c{source, positions};
  try {
    return c.convert(doc, 0, "");
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(where(source, e.mark) + ": YAML: " + e.msg);
  }
}

}  // namespace mixprec::io
