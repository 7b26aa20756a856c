// backend/cpu/column_sum.cpp: see column_sum.h. The column loop is innermost and
// contiguous (omp simd), built for AVX-512 when the CPU has it (16 lanes instead of the
// baseline's 4).
#include "backend/cpu/column_sum.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu {
namespace {

// Work items are (chunk of kRows rows) x (block of kCols columns): enough items for every
// thread even when the matrix is narrow (a [4096, 256] bias gradient is 16 items), and a
// block's kCols f32 accumulators stay in registers. Each item writes its partial sums;
// the partials of a column are then added in chunk order, so the result depends only on
// the shape, not on the thread count.
constexpr int64_t kRows = 256;
constexpr int64_t kCols = 256;

inline float widen(float v) { return v; }
inline float widen(uint16_t bf16_bits) { return std::bit_cast<float>(uint32_t(bf16_bits) << 16); }

template <typename T>
MIXPREC_ALWAYS_INLINE void sum_columns(const T* x, float* out, int64_t rows,
                                                       int64_t cols) {
  const int64_t chunks = (rows + kRows - 1) / kRows, blocks = (cols + kCols - 1) / kCols;
  std::vector<float> partial(size_t(chunks * cols));
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t item = 0; item < chunks * blocks; ++item) {
    const int64_t chunk = item / blocks, c0 = (item % blocks) * kCols;
    const int64_t width = std::min(kCols, cols - c0);
    const int64_t r0 = chunk * kRows, r1 = std::min(rows, r0 + kRows);
    float acc[kCols] = {};
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * cols + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) acc[c] += widen(row[c]);
    }
    float* p = partial.data() + chunk * cols + c0;
    for (int64_t c = 0; c < width; ++c) p[c] = acc[c];
  }
  for (int64_t c = 0; c < cols; ++c) out[c] = 0.0f;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const float* p = partial.data() + chunk * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] += p[c];
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
  (cpu_features().avx512f ? sum_columns_avx512<T> : sum_columns_baseline<T>)(x, out, rows, cols);
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
