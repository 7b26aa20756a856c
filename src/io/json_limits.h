// io/json_limits.h: a nesting limit for JSON read from files. nlohmann's parser is iterative,
// but dump(), copies and comparisons of a parsed value recurse once per level, so a
// checkpoint whose metadata or a config.json nested 100,000 levels deep overflowed the stack
// in an error message or a copy. Every reader of such JSON checks this first (a linear scan,
// no allocation) and refuses deeper text with a message naming the file and the limit.
#pragma once
#include <cstddef>
#include <string_view>

namespace mixprec::io {

// Far above anything mixprec writes (config and metadata are at most 2 levels deep), far
// below what recursion on an 8 MiB stack survives (even under ASan).
inline constexpr size_t kMaxJsonDepth = 64;

// True when no array/object in text is nested deeper than max_depth ("[]" is depth 1).
// Brackets inside strings do not count. Malformed text is not judged here: the parser does.
bool json_depth_within(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). Text that
// ends up in JSON (a YAML value, a CSV column or label, a folder's class name, all recorded in
// config.json) must be: nlohmann's dump throws on anything else.
bool is_valid_utf8(std::string_view s);

}  // namespace mixprec::io
