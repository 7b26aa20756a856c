// io/safetensors_header.h: a safetensors file's JSON header, parsed and checked entry by entry
// (safetensors_header.cpp); the reader (safetensors.cpp) then checks that the entries tile the
// data buffer and reads the tensors. Shared by the two: an entry, and how messages name things.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::io {

// One tensor of the header: its byte range [begin, end) in the data buffer, checked against
// its dtype and shape (nbytes = end - begin).
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end, nbytes;
};

// "safetensors file 'F': what", as data_loss.
Status safetensors_loss(const std::string& file, const std::string& what);
// A name as messages show it: a hostile header may hold megabyte-long keys.
std::string shown_name(const std::string& name);

// Parses the header text (a SAX parse: linear time, memory bounded by the header, nesting at
// most 64 levels) into entries (in header order) and the __metadata__ strings; every field
// of every entry is checked here, the entries' tiling of the buffer is not.
Status parse_safetensors_header(const std::string& file, const std::string& text,
                                std::vector<SafetensorsEntry>& entries,
                                std::map<std::string, std::string>& metadata);

}  // namespace mixprec::io
