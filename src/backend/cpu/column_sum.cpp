// backend/cpu/column_sum.cpp: see column_sum.h. Threads split the columns into blocks of
// kBlock; inside a block the column loop is innermost and contiguous (omp simd), built
// for AVX-512 when the CPU has it (16 lanes instead of the baseline's 4).
#include "backend/cpu/column_sum.h"

#include <bit>
#include <cstdint>
#include <string>

#include "mixprec/status.h"

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kBlock = 256;

inline float widen(float v) { return v; }
inline float widen(uint16_t bf16_bits) { return std::bit_cast<float>(uint32_t(bf16_bits) << 16); }

template <typename T>
inline __attribute__((always_inline)) void sum_columns(const T* x, float* out, int64_t rows,
                                                       int64_t cols) {
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kBlock, c1 = std::min(cols, c0 + kBlock);
    float acc[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * cols;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += widen(row[c]);
    }
    for (int64_t c = c0; c < c1; ++c) out[c] = acc[c - c0];
  }
}

template <typename T>
__attribute__((target("avx512f"))) void sum_columns_avx512(const T* x, float* out, int64_t rows,
                                                           int64_t cols) {
  sum_columns(x, out, rows, cols);
}
template <typename T>
void sum_columns_baseline(const T* x, float* out, int64_t rows, int64_t cols) {
  sum_columns(x, out, rows, cols);
}

template <typename T>
void dispatch(const T* x, float* out, int64_t rows, int64_t cols) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  (avx512 ? sum_columns_avx512<T> : sum_columns_baseline<T>)(x, out, rows, cols);
}

}  // namespace

Tensor column_sums_f32(const Tensor& x) {
  if (x.dim() != 2 || !x.is_contiguous() || (x.dtype() != DType::f32 && x.dtype() != DType::bf16))
    throw Error(Status::invalid_argument("column_sums_f32: expected a contiguous 2-D f32 or bf16 "
                                         "matrix, got " + std::string(dtype_name(x.dtype())) +
                                         " " + shape_str(x.shape())));
  const int64_t rows = x.size(0), cols = x.size(1);
  Tensor out = Tensor::empty({cols}, DType::f32);
  float* o = static_cast<float*>(out.data());
  if (x.dtype() == DType::f32)
    dispatch(static_cast<const float*>(x.data()), o, rows, cols);
  else
    dispatch(static_cast<const uint16_t*>(x.data()), o, rows, cols);
  return out;
}

}  // namespace mixprec::backend::cpu
