// mixprec/data/npy.h: NumPy .npy arrays (format versions 1.0, 2.0 and 3.0), read strictly: the
// header dict must hold exactly 'descr', 'fortran_order' and 'shape'; C order only; dtypes
// u1/i1/i2/i4/i8/f2/f4/f8 little-endian (or byte-sized); the data must be exactly the size the
// shape says. Anything else is refused with a message naming the file and the field, before
// any allocation larger than the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec {

struct NpyArray {
  std::string descr;            // as in the file, e.g. "<f4", "|u1"
  std::vector<int64_t> shape;   // () is a scalar: one element
  std::vector<double> values;   // every element, converted exactly to double, C order
};

// Errors: not_found / io_error (the file), data_loss (anything malformed), invalid_argument
// (a valid .npy of a dtype or layout mixprec does not read: object arrays, Fortran order,
// big-endian, complex, strings).
StatusOr<NpyArray> read_npy(const std::string& path);
StatusOr<NpyArray> parse_npy(const uint8_t* data, size_t size, const std::string& name);

}  // namespace mixprec
