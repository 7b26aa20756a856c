// backend/ref/ref_util.h: the few helpers every reference kernel shares. Kernels read
// their inputs into row-major std::vector<double> (any dtype, any strides), compute in
// double, and round once when writing a new contiguous output. Slow but obviously correct:
// this is the code every other backend is judged against.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::backend::ref {

// Values of t in logical row-major order, converted to double. Reads through t's shape,
// strides and storage offset, so views and channels-last tensors need no copy first.
std::vector<double> read_f64(const Tensor& t);

// A new contiguous tensor of `dtype` holding `values` (row-major), each rounded once.
Tensor make_tensor(const std::vector<double>& values, const Shape& shape, DType dtype);

// Throws Error(invalid_argument) with `message` (the caller names op, fields and values).
[[noreturn]] void fail(const std::string& message);

// "<op>: <name> has dtype i64, expected a floating dtype"
void check_floating(const char* op, const char* name, const Tensor& t);
// "<op>: dtype mismatch: src f32 vs weights bf16"; also checks a is floating.
void check_same_dtype(const char* op, const char* name_a, const Tensor& a,
                      const char* name_b, const Tensor& b);
// "<op>: src [2, 3] must be 4-D"
void check_rank(const char* op, const char* name, const Tensor& t, int64_t rank);
void check_rank(const char* op, const char* name, const Shape& shape, int64_t rank);
// "<op>: diff_dst [..] and dst [..] must have the same shape"
void check_same_shape(const char* op, const char* name_a, const Shape& a, const char* name_b,
                      const Shape& b);

}  // namespace mixprec::backend::ref
