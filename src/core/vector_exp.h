// core/vector_exp.h: exp of 16 floats with AVX-512 and of 8 floats with AVX2+FMA (the same
// Cephes-style expf: Cody-Waite range reduction, degree-6 polynomial, ~1 ulp; both widths
// give the same bits for results that are normal floats), shared by the vector kernels (GELU,
// softmax, the fused attention); and exp of 8 doubles (the float64 loss kernels).
// Inputs are clamped to [-87, 88], so the result is a normal float or +0-ish (~1.6e-38 at
// -87, never inf); callers whose inputs go lower treat that as 0 to within f32 rounding of
// anything they add it to. Only for functions compiled with target("avx512f"), resp.
// target("avx2,fma").
#pragma once
#include <immintrin.h>

namespace mixprec {

// GCC 12 builds several AVX-512 intrinsics (min/max, roundscale, cvtps_epi32, slli) on
// _mm512_undefined_*(), which -Wmaybe-uninitialized reports at each inlined use: a known
// false positive, silenced for these two functions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// e^x as p * 2^n (returned: p; n through the reference) for an x the caller has clamped:
// n = round(x / ln2), r = x - n ln2 in two parts (Cody-Waite), then Cephes' expf polynomial
// on r. exp_avx512 and exp_nonpositive_avx512 below share it and apply 2^n each their own
// way (an exponent field; vscalefps).
__attribute__((target("avx512f"))) inline __m512 exp_avx512_scaled(__m512 x, __m512& n) {
  n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return p;
}

__attribute__((target("avx512f"))) inline __m512 exp_avx512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  __m512 n;
  const __m512 p = exp_avx512_scaled(x, n);
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));  // times 2^n, n in [-126, 127]
}

// e^x for x <= 0 (softmax arguments less their row's max, GELU's -x^2/2): exp_avx512's
// reduction and polynomial, the same bits wherever e^x is a normal float, with 2^n applied by
// vscalefps instead of an exponent field built in three integer steps and a multiply, and
// no upper clamp. Kernels bound by these instructions (the fused attention's softmax, GELU)
// save a quarter of exp's cost. Below -87 the result is subnormal or 0 (exp_avx512 stops at
// 1.6e-38); a NaN becomes the clamp, -104, as in exp_avx512 (callers see NaN elsewhere).
__attribute__((target("avx512f"))) inline __m512 exp_nonpositive_avx512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  __m512 n;
  const __m512 p = exp_avx512_scaled(x, n);
  return _mm512_scalef_ps(p, n);
}
#pragma GCC diagnostic pop

// exp of 8 doubles with AVX-512, to ~1 ulp of double (for kernels that work in float64 and
// round once to f32, so that the rounding, not the exp, decides the result): n = round(x /
// ln2), r = x - n ln2 in two parts (|r| <= 0.35), e^r by its Taylor polynomial to r^13
// (truncation 4e-18, below half an ulp), times 2^n. NaN stays NaN; x < -708 gives +0 (e^x
// is below 3.3e-308 there: nothing a sum of terms >= 1, or a result rounded to f32, can
// see); x > 709 gives +inf.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline __m512d exp_f64_avx512(__m512d x) {
  const __m512d xc = _mm512_min_pd(_mm512_max_pd(x, _mm512_set1_pd(-708.0)), _mm512_set1_pd(709.0));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(xc, _mm512_set1_pd(1.4426950408889634074)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), xc);  // ln2 high part
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);         // ln2 low part
  // 1/13! ... 1/2!, Horner.
  constexpr double kInvFact[12] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                   1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                   1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5};
  __m512d p = _mm512_set1_pd(kInvFact[0]);
  for (int k = 1; k < 12; ++k) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(kInvFact[k]));
  p = _mm512_fmadd_pd(_mm512_mul_pd(p, r), r, _mm512_add_pd(r, _mm512_set1_pd(1.0)));  // 1 + r + r^2 p
  // 2^n for n in [-1022, 1023]: the exponent field built directly.
  const __m512i e = _mm512_slli_epi64(
      _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(n)), _mm512_set1_epi64(1023)), 52);
  __m512d out = _mm512_mul_pd(p, _mm512_castsi512_pd(e));
  out = _mm512_mask_mov_pd(out, _mm512_cmp_pd_mask(x, _mm512_set1_pd(-708.0), _CMP_LT_OQ), _mm512_setzero_pd());
  out = _mm512_mask_mov_pd(out, _mm512_cmp_pd_mask(x, _mm512_set1_pd(709.0), _CMP_GT_OQ),
                           _mm512_set1_pd(__builtin_inf()));
  return _mm512_mask_mov_pd(out, _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), x);  // NaN in, NaN out
}
#pragma GCC diagnostic pop

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

}  // namespace mixprec
