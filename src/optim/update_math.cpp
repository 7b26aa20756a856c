// update_math.cpp: SGD and Adam per-element formulas, scalar and AVX-512 (see update_math.h).
// Kept apart from the tiling/dtype code so that the arithmetic that must match PyTorch's
// order lives in one short file. No FMA anywhere: a fused multiply-add rounds once where
// PyTorch's single-tensor loop rounds twice, and the vector path must equal the scalar one.
#include "optim/update_math.h"

// GCC contracts a*b + c into an FMA by default in C++ (-ffp-contract=fast), intrinsics
// included (they are plain vector operators), whenever the target has FMA, as every
// AVX-512 one does. That would change the rounding, so contraction is off for this file.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include <cmath>

#include "core/cpu_features.h"

namespace mixprec::optim {

namespace {

enum class Decay { none, l2, decoupled };

template <Decay D>
void adam_scalar_loop(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    float pi = p[i];
    if constexpr (D == Decay::decoupled) pi = pi * c.decay;
    if constexpr (D == Decay::l2) gi = gi + c.weight_decay * pi;
    const float mi = m[i] * c.beta1 + c.one_minus_beta1 * gi;
    const float vi = v[i] * c.beta2 + c.one_minus_beta2 * (gi * gi);
    const float denom = std::sqrt(vi) / c.bc2_sqrt + c.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + c.neg_step_size * (mi / denom);
  }
}

// ---- AVX-512: 16 lanes, the tail through masked loads/stores (same arithmetic) ----------
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_* false positive

__attribute__((target("avx512f"))) inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
}

template <Decay D>
__attribute__((target("avx512f"))) void adam_avx512_loop(float* p, const float* g, float* m, float* v,
                                                         int64_t n, const AdamCoeffs& c) {
  const __m512 beta1 = _mm512_set1_ps(c.beta1), omb1 = _mm512_set1_ps(c.one_minus_beta1);
  const __m512 beta2 = _mm512_set1_ps(c.beta2), omb2 = _mm512_set1_ps(c.one_minus_beta2);
  const __m512 eps = _mm512_set1_ps(c.eps), bc2 = _mm512_set1_ps(c.bc2_sqrt);
  const __m512 nss = _mm512_set1_ps(c.neg_step_size);
  const __m512 wd = _mm512_set1_ps(c.weight_decay), decay = _mm512_set1_ps(c.decay);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    __m512 gi = _mm512_maskz_loadu_ps(k, g + i);
    __m512 pi = _mm512_maskz_loadu_ps(k, p + i);
    if constexpr (D == Decay::decoupled) pi = _mm512_mul_ps(pi, decay);
    if constexpr (D == Decay::l2) gi = _mm512_add_ps(gi, _mm512_mul_ps(wd, pi));
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, m + i), beta1), _mm512_mul_ps(omb1, gi));
    const __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, v + i), beta2),
                                    _mm512_mul_ps(omb2, _mm512_mul_ps(gi, gi)));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), eps);
    _mm512_mask_storeu_ps(m + i, k, mi);
    _mm512_mask_storeu_ps(v + i, k, vi);
    _mm512_mask_storeu_ps(p + i, k, _mm512_add_ps(pi, _mm512_mul_ps(nss, _mm512_div_ps(mi, denom))));
  }
}

// One SGD element with the loop-invariant choices as template flags (see sgd_tile_scalar).
template <bool Wd, bool Momentum, bool First, bool Nesterov>
__attribute__((target("avx512f"))) void sgd_avx512_loop(float* p, const float* g, float* buf, int64_t n,
                                                        const SgdCoeffs& c) {
  const __m512 neg_lr = _mm512_set1_ps(c.neg_lr), wd = _mm512_set1_ps(c.weight_decay);
  const __m512 mom = _mm512_set1_ps(c.momentum), omd = _mm512_set1_ps(c.one_minus_dampening);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 pi = _mm512_maskz_loadu_ps(k, p + i);
    __m512 d = _mm512_maskz_loadu_ps(k, g + i);
    if constexpr (Wd) d = _mm512_add_ps(d, _mm512_mul_ps(wd, pi));
    if constexpr (Momentum) {
      __m512 b;
      if constexpr (First) b = d;
      else b = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, buf + i), mom), _mm512_mul_ps(omd, d));
      _mm512_mask_storeu_ps(buf + i, k, b);
      d = Nesterov ? _mm512_add_ps(d, _mm512_mul_ps(mom, b)) : b;
    }
    _mm512_mask_storeu_ps(p + i, k, _mm512_add_ps(pi, _mm512_mul_ps(neg_lr, d)));
  }
}

#pragma GCC diagnostic pop

template <bool Wd, bool Momentum, bool First>
void sgd_avx512_nesterov(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  if (c.nesterov) sgd_avx512_loop<Wd, Momentum, First, true>(p, g, buf, n, c);
  else sgd_avx512_loop<Wd, Momentum, First, false>(p, g, buf, n, c);
}

void sgd_avx512(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  const bool wd = c.weight_decay != 0.0f;
  if (c.momentum == 0.0f) {
    if (wd) sgd_avx512_loop<true, false, false, false>(p, g, buf, n, c);
    else sgd_avx512_loop<false, false, false, false>(p, g, buf, n, c);
  } else if (c.first_step) {
    if (wd) sgd_avx512_nesterov<true, true, true>(p, g, buf, n, c);
    else sgd_avx512_nesterov<false, true, true>(p, g, buf, n, c);
  } else {
    if (wd) sgd_avx512_nesterov<true, true, false>(p, g, buf, n, c);
    else sgd_avx512_nesterov<false, true, false>(p, g, buf, n, c);
  }
}

bool use_avx512() {
  static const bool yes = cpu_features().avx512f;
  return yes;
}

}  // namespace

void adam_tile_scalar(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c) {
  if (c.decoupled) adam_scalar_loop<Decay::decoupled>(p, g, m, v, n, c);
  else if (c.weight_decay != 0.0f) adam_scalar_loop<Decay::l2>(p, g, m, v, n, c);
  else adam_scalar_loop<Decay::none>(p, g, m, v, n, c);
}

void sgd_tile_scalar(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (c.weight_decay != 0.0f) d = d + c.weight_decay * p[i];
    if (c.momentum != 0.0f) {
      buf[i] = c.first_step ? d : buf[i] * c.momentum + c.one_minus_dampening * d;
      d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
    }
    p[i] = p[i] + c.neg_lr * d;
  }
}

void adam_tile(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c) {
  if (!use_avx512()) return adam_tile_scalar(p, g, m, v, n, c);
  if (c.decoupled) adam_avx512_loop<Decay::decoupled>(p, g, m, v, n, c);
  else if (c.weight_decay != 0.0f) adam_avx512_loop<Decay::l2>(p, g, m, v, n, c);
  else adam_avx512_loop<Decay::none>(p, g, m, v, n, c);
}

void sgd_tile(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  if (!use_avx512()) return sgd_tile_scalar(p, g, buf, n, c);
  sgd_avx512(p, g, buf, n, c);
}

}  // namespace mixprec::optim
