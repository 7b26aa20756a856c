// backend/cpu/softmax_rows.cpp: see softmax_rows.h. Rows are split across threads (static:
// each row is one thread's work, so results do not depend on the thread count). A row is
// widened to f32 in a stack buffer (the library's vectorised conversion), processed 16
// lanes at a time with AVX-512 when present (scalar f32 otherwise), and rounded back.
#include "backend/cpu/softmax_rows.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/vector_exp.h"
#include "mixprec/core/status.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;
constexpr int64_t kStackRow = 1024;  // longer rows use a heap buffer per thread

// exp_avx512 clamps below at -87 (result ~1.6e-38): differences below this are exactly 0
// here, as expf gives for them to within the f32 rounding of the row sum.
constexpr float kExpUnderflow = -87.0f;

// y = softmax(x) in place over n floats, scalar: the reference arithmetic, and the path
// for rows with a NaN or an infinite maximum (IEEE rules give PyTorch's NaN rows).
void forward_scalar(float* a, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    nan |= std::isnan(a[i]);
    m = std::max(m, a[i]);
  }
  if (nan) m = std::numeric_limits<float>::quiet_NaN();
  // The sum in double: a serial f32 sum would err by ~n ulps on long rows, more than the
  // vector path's 16 partial sums do.
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += (a[i] = std::exp(a[i] - m));
  const double inv = 1.0 / s;
  for (int64_t i = 0; i < n; ++i) a[i] = float(a[i] * inv);
}

// GCC 12's _mm512_reduce_* and masked loads build on _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at each inlined use (a false positive, as in vector_exp.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

__attribute__((target("avx512f"))) void forward_avx512(float* a, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_mask_loadu_ps(neg_inf, lanes16(i, n), a + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    vmax = _mm512_max_ps(vmax, v);
  }
  const float m = _mm512_reduce_max_ps(vmax);
  if (nan != 0 || !std::isfinite(m)) return forward_scalar(a, n);
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(i, n);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, a + i), vm);
    const __mmask16 live = k & _mm512_cmp_ps_mask(d, _mm512_set1_ps(kExpUnderflow), _CMP_GE_OQ);
    const __m512 e = _mm512_maskz_mov_ps(live, exp_avx512(d));
    acc = _mm512_add_ps(acc, e);
    _mm512_mask_storeu_ps(a + i, k, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(acc));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(i, n);
    _mm512_mask_storeu_ps(a + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + i), inv));
  }
}

// dx = y * (dy - sum(dy * y)) in place over g (which holds dy on entry).
void backward_scalar(const float* y, float* g, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(g[i]) * y[i];
  for (int64_t i = 0; i < n; ++i) g[i] = float(y[i] * (g[i] - s));
}

__attribute__((target("avx512f"))) void backward_avx512(const float* y, float* g, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(i, n);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, g + i), _mm512_maskz_loadu_ps(k, y + i), acc);
  }
  const __m512 s = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(i, n);
    const __m512 yv = _mm512_maskz_loadu_ps(k, y + i);
    _mm512_mask_storeu_ps(g + i, k, _mm512_mul_ps(yv, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, g + i), s)));
  }
}

#pragma GCC diagnostic pop

void check(const char* op, const char* name, const Tensor& t) {
  const DType d = t.dtype();
  if (t.dim() < 1 || !t.is_contiguous() || (d != DType::f32 && d != DType::bf16 && d != DType::f16))
    throw Error(Status::invalid_argument(std::string(op) + ": " + name +
                                         " must be a contiguous f32/bf16/f16 tensor of at least "
                                         "1 dim, got " + t.str()));
}

// Runs body(row, f32 buffers a and b of the row's length) for every row, in parallel.
template <typename Body>
void for_each_row(int64_t rows, int64_t n, Body&& body) {
#pragma omp parallel if (rows * n > kParallelMin)
  {
    alignas(64) float sa[kStackRow], sb[kStackRow];
    std::vector<float> ha, hb;
    if (n > kStackRow) {
      ha.resize(size_t(n));
      hb.resize(size_t(n));
    }
    float* a = n > kStackRow ? ha.data() : sa;
    float* b = n > kStackRow ? hb.data() : sb;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) body(r, a, b);
  }
}

}  // namespace

Tensor softmax_rows_forward(const Tensor& x, bool causal) {
  check("softmax_rows_forward", "x", x);
  if (causal && (x.dim() < 2 || x.size(x.dim() - 2) != x.size(x.dim() - 1)))
    throw Error(Status::invalid_argument("softmax_rows_forward: causal needs [..., S, S] scores, got " + x.str()));
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const int64_t n = x.size(x.dim() - 1);
  if (y.numel() == 0 || n == 0) return y;
  const int64_t rows = x.numel() / n;
  const DType dt = x.dtype();
  const size_t row_bytes = size_t(n) * dtype_size(dt);
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(y.data());
  const bool vec = cpu_features().avx512f;
  for_each_row(rows, n, [&](int64_t r, float* a, float*) {
    const int64_t len = causal ? r % n + 1 : n;  // row i of an S x S block: columns 0..i
    convert_elements(src + size_t(r) * row_bytes, dt, a, DType::f32, len);
    vec ? forward_avx512(a, len) : forward_scalar(a, len);
    for (int64_t j = len; j < n; ++j) a[j] = 0.0f;
    convert_elements(a, DType::f32, dst + size_t(r) * row_bytes, dt, n);
  });
  return y;
}

Tensor softmax_rows_backward(const Tensor& y, const Tensor& dy) {
  check("softmax_rows_backward", "y", y);
  check("softmax_rows_backward", "dy", dy);
  if (dy.shape() != y.shape() || dy.dtype() != y.dtype())
    throw Error(Status::invalid_argument("softmax_rows_backward: dy " + dy.str() +
                                         " must have y's shape and dtype, y is " + y.str()));
  Tensor dx = Tensor::empty(y.shape(), y.dtype());
  const int64_t n = y.size(y.dim() - 1);
  if (dx.numel() == 0 || n == 0) return dx;
  const int64_t rows = y.numel() / n;
  const DType dt = y.dtype();
  const size_t row_bytes = size_t(n) * dtype_size(dt);
  const char* ys = static_cast<const char*>(y.data());
  const char* gs = static_cast<const char*>(dy.data());
  char* out = static_cast<char*>(dx.data());
  const bool vec = cpu_features().avx512f;
  for_each_row(rows, n, [&](int64_t r, float* a, float* b) {
    convert_elements(ys + size_t(r) * row_bytes, dt, a, DType::f32, n);
    convert_elements(gs + size_t(r) * row_bytes, dt, b, DType::f32, n);
    vec ? backward_avx512(a, b, n) : backward_scalar(a, b, n);
    convert_elements(b, DType::f32, out + size_t(r) * row_bytes, dt, n);
  });
  return dx;
}

}  // namespace mixprec::backend::cpu
