// update_math.cpp: SGD and Adam per-element formulas (update_formula.inc) compiled for the
// scalar, AVX2+FMA and AVX-512 paths, and PyTorch's scalar coefficients (update_math.h).
// Kept apart from the tiling/dtype code so that the arithmetic that must match PyTorch's
// rounding lives in two short files.
#include "optim/update_math.h"

// GCC contracts a*b + c into an FMA by default in C++ (-ffp-contract=fast), intrinsics
// included (they are plain vector operators), whenever the target has FMA. PyTorch fuses in
// some places and not in others, so every fusion here is written out (std::fma, fmadd) and
// contraction is off for the rest of this file.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/cpu_features.h"

namespace mixprec::optim {

namespace {

// torch.maximum on f32 lanes: a NaN in either operand gives NaN (all bits set, as ATen's
// vectorised maximum ORs in the unordered mask); otherwise maxps's choice (the second
// operand when equal).
float maximum_scalar(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) {
    const uint32_t all = 0xffffffffu;
    float r;
    std::memcpy(&r, &all, 4);
    return r;
  }
  return a > b ? a : b;
}

// ---- scalar: one lane, std::fma (exact fused multiply-add, libm's when the build target has
// no FMA instruction) -------------------------------------------------------------------------
namespace scalar {
struct Ops {
  using V = float;
  static constexpr int64_t W = 1;
  static V set1(float x) { return x; }
  static V load(const float* p, int64_t) { return *p; }
  static void store(float* p, V v, int64_t) { *p = v; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V div(V a, V b) { return a / b; }
  static V sqrt(V a) { return std::sqrt(a); }
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V neg(V a) { return -a; }
  static V maximum(V a, V b) { return maximum_scalar(a, b); }
};
#include "optim/update_formula.inc"
}  // namespace scalar

// ---- AVX2 + FMA: 8 lanes, the tail through masked loads/stores (same arithmetic) -----------
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
struct Ops {
  using V = __m256;
  static constexpr int64_t W = 8;
  static MIXPREC_ALWAYS_INLINE __m256i mask(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(left < 8 ? left : 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static MIXPREC_ALWAYS_INLINE V set1(float x) { return _mm256_set1_ps(x); }
  static MIXPREC_ALWAYS_INLINE V load(const float* p, int64_t left) {
    return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask(left));
  }
  static MIXPREC_ALWAYS_INLINE void store(float* p, V v, int64_t left) {
    if (left >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, mask(left), v);
  }
  static MIXPREC_ALWAYS_INLINE V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static MIXPREC_ALWAYS_INLINE V add(V a, V b) { return _mm256_add_ps(a, b); }
  static MIXPREC_ALWAYS_INLINE V div(V a, V b) { return _mm256_div_ps(a, b); }
  static MIXPREC_ALWAYS_INLINE V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static MIXPREC_ALWAYS_INLINE V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static MIXPREC_ALWAYS_INLINE V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static MIXPREC_ALWAYS_INLINE V maximum(V a, V b) {
    return _mm256_or_ps(_mm256_max_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
};
#include "optim/update_formula.inc"
void adam(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamCoeffs& c) {
  adam_loop<Ops>(p, g, m, v, vmax, n, c);
}
void sgd(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) { sgd_loop<Ops>(p, g, buf, n, c); }
}  // namespace avx2
#pragma GCC pop_options

// ---- AVX-512: 16 lanes, masked tail ---------------------------------------------------------
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_* false positive
#pragma GCC push_options
#pragma GCC target("avx512f")
namespace avx512 {
struct Ops {
  using V = __m512;
  static constexpr int64_t W = 16;
  static MIXPREC_ALWAYS_INLINE __mmask16 mask(int64_t left) {
    return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
  }
  static MIXPREC_ALWAYS_INLINE V set1(float x) { return _mm512_set1_ps(x); }
  static MIXPREC_ALWAYS_INLINE V load(const float* p, int64_t left) { return _mm512_maskz_loadu_ps(mask(left), p); }
  static MIXPREC_ALWAYS_INLINE void store(float* p, V v, int64_t left) { _mm512_mask_storeu_ps(p, mask(left), v); }
  static MIXPREC_ALWAYS_INLINE V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static MIXPREC_ALWAYS_INLINE V add(V a, V b) { return _mm512_add_ps(a, b); }
  static MIXPREC_ALWAYS_INLINE V div(V a, V b) { return _mm512_div_ps(a, b); }
  static MIXPREC_ALWAYS_INLINE V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static MIXPREC_ALWAYS_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static MIXPREC_ALWAYS_INLINE V neg(V a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int(0x80000000u))));
  }
  static MIXPREC_ALWAYS_INLINE V maximum(V a, V b) {
    const __mmask16 nan = _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(_mm512_max_ps(a, b), nan, _mm512_castsi512_ps(_mm512_set1_epi32(-1)));
  }
};
#include "optim/update_formula.inc"
void adam(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamCoeffs& c) {
  adam_loop<Ops>(p, g, m, v, vmax, n, c);
}
void sgd(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) { sgd_loop<Ops>(p, g, buf, n, c); }
}  // namespace avx512
#pragma GCC pop_options
#pragma GCC diagnostic pop

enum class Isa { scalar, avx2, avx512 };

Isa isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) return Isa::avx512;
  if (f.avx2 && f.fma) return Isa::avx2;
  return Isa::scalar;
}

}  // namespace

AdamCoeffs adam_coeffs(double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                       bool amsgrad, bool maximize, int64_t step) {
  // torch/optim/adam.py: bias_correction = 1 - beta ** step (Python floats: C pow),
  // step_size = lr / bias_correction1, addcdiv_'s value=-step_size and every other Python
  // float cast to f32 by the kernel once.
  const double bc1 = 1.0 - std::pow(beta1, double(step));
  const double bc2 = 1.0 - std::pow(beta2, double(step));
  AdamCoeffs c;
  c.beta1 = float(beta1);
  c.one_minus_beta1 = float(1.0 - beta1);
  c.beta2 = float(beta2);
  c.one_minus_beta2 = float(1.0 - beta2);
  c.eps = float(eps);
  c.weight_decay = float(weight_decay);
  c.decay = float(1.0 - lr * weight_decay);
  c.neg_step_size = float(-(lr / bc1));
  c.bc2_sqrt = float(std::sqrt(bc2));
  c.decoupled = decoupled;
  c.amsgrad = amsgrad;
  c.maximize = maximize;
  return c;
}

SgdCoeffs sgd_coeffs(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                     bool first_step, bool maximize) {
  SgdCoeffs c;
  c.neg_lr = float(-lr);
  c.momentum = float(momentum);
  c.one_minus_dampening = float(1.0 - dampening);
  c.weight_decay = float(weight_decay);
  c.nesterov = nesterov;
  c.first_step = first_step;
  c.maximize = maximize;
  return c;
}

void adam_tile_scalar(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamCoeffs& c) {
  scalar::adam_loop<scalar::Ops>(p, g, m, v, vmax, n, c);
}

void sgd_tile_scalar(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  scalar::sgd_loop<scalar::Ops>(p, g, buf, n, c);
}

void adam_tile(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamCoeffs& c) {
  static const Isa path = isa();
  if (path == Isa::avx512) return avx512::adam(p, g, m, v, vmax, n, c);
  if (path == Isa::avx2) return avx2::adam(p, g, m, v, vmax, n, c);
  adam_tile_scalar(p, g, m, v, vmax, n, c);
}

void sgd_tile(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  static const Isa path = isa();
  if (path == Isa::avx512) return avx512::sgd(p, g, buf, n, c);
  if (path == Isa::avx2) return avx2::sgd(p, g, buf, n, c);
  sgd_tile_scalar(p, g, buf, n, c);
}

const char* update_math_isa() {
  switch (isa()) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace mixprec::optim
