// backend/cpu/log.cpp: see log.h. Static OpenMP chunks: each element is computed once by the
// same formula whatever the thread count, so the bits do not depend on it.
#include "backend/cpu/log.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/tail_mask.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kChunk = 1 << 14;
constexpr int64_t kParallelMin = 1 << 15;

// Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), t = m - 1, then
// log x = t - t^2/2 + t^3 P(t) + e ln2, ln2 split in two parts so that e ln2 adds exactly.
__attribute__((target("avx512f"))) __m512 log16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  // vgetmantps to [0.5, 1) and vgetexpps: the exponent of normal and denormal inputs alike.
  __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_zero);
  __m512 e = _mm512_add_ps(_mm512_getexp_ps(x), one);
  const __mmask16 low = _mm512_cmp_ps_mask(m, _mm512_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm512_mask_sub_ps(e, low, e, one);
  m = _mm512_mask_add_ps(m, low, m, m);
  const __m512 t = _mm512_sub_ps(m, one);
  const __m512 z = _mm512_mul_ps(t, t);
  __m512 p = _mm512_set1_ps(7.0376836292e-2f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.1514610310e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.1676998740e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.2420140846e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.4249322787e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.6668057665e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(2.0000714765e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-2.4999993993e-1f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(3.3333331174e-1f));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, t), z);
  y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fmadd_ps(z, _mm512_set1_ps(-0.5f), y);
  __m512 r = _mm512_add_ps(t, y);
  r = _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), r);
  // The IEEE cases: +-0 -> -inf, negative -> NaN, +inf -> +inf, NaN -> itself.
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_sub_ps(_mm512_setzero_ps(), inf));
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                         _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, inf, _CMP_EQ_OQ), inf);
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

__attribute__((target("avx512f"))) void log_range_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(i, n);
    _mm512_mask_storeu_ps(y + i, k, log16(_mm512_maskz_loadu_ps(k, x + i)));
  }
}

void log_range_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}

}  // namespace

bool log_applies(const Tensor& x) { return x.defined() && x.dtype() == DType::f32 && x.is_dense(); }

Tensor log_forward(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
  const float* in = static_cast<const float*>(x.data());
  float* out = static_cast<float*>(y.data());
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  const bool wide = cpu_features().avx512f;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk, len = std::min(kChunk, n - off);
    if (wide) log_range_avx512(in + off, out + off, len);
    else log_range_scalar(in + off, out + off, len);
  }
  return y;
}

}  // namespace mixprec::backend::cpu
