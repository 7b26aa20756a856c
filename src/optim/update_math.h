// update_math.h: the per-element f32 update formulas of SGD and Adam/AdamW over one tile of
// contiguous floats, bit-identical to PyTorch 1.13's single-tensor (foreach=False) CPU path.
//
// PyTorch's step is a chain of ATen ops, each rounding its result to f32 once. The ones that
// take a scalar factor fuse it: add_(x, alpha=a) is vec::fmadd(x, a, self) (one rounding),
// addcmul_(t1, t2, value=c) is fma(c*t1, t2, self) (c*t1 rounded, then one fused rounding),
// addcdiv_(t1, t2, value=c) is (c*t1)/t2 + self (three roundings, nothing to fuse), mul_ and
// the division by a Python float are one rounding each. The scalar tail of ATen's
// vectorised loops (the elements past the last whole pair of vectors) gives the same bits:
// GCC contracted the scalar lambdas into the same FMAs (verified on PyTorch's AVX2 build,
// tests/golden/gen_optim.py checks it on every run). So one formula, with std::fma / the FMA
// instruction exactly where PyTorch fuses, serves the scalar, AVX2+FMA and AVX-512 paths.
//
// Scalars PyTorch's Python code passes (lr, betas, 1 - beta, lr / bias_correction1, ...) are
// computed in double and cast to f32 by the kernel; the *Coeffs builders below do the same.
#pragma once
#include <cstdint>

namespace mixprec::optim {

// Adam/AdamW constants as the loop uses them, already rounded to f32.
struct AdamCoeffs {
  float beta1 = 0, one_minus_beta1 = 0;  // float(beta1), float(1.0 - beta1) (double subtraction)
  float beta2 = 0, one_minus_beta2 = 0;
  float eps = 0;
  float weight_decay = 0;   // Adam: g = fma(p, wd, g) when != 0
  float decay = 1;          // AdamW: p *= float(1 - lr * wd) first
  float neg_step_size = 0;  // float(-(lr / bias_correction1))
  float bc2_sqrt = 1;       // float(sqrt(bias_correction2))
  bool decoupled = false;
  bool amsgrad = false;     // denominator from max(max_exp_avg_sq, exp_avg_sq)
  bool maximize = false;    // the gradient negated first
};

// SGD constants, rounded to f32.
struct SgdCoeffs {
  float neg_lr = 0;               // float(-lr)
  float momentum = 0;             // 0: no buffer
  float one_minus_dampening = 1;  // float(1.0 - dampening)
  float weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // the buffer starts as the first gradient (PyTorch's clone)
  bool maximize = false;
};

// PyTorch's scalars for step `step` (1-based), double math then one cast each.
AdamCoeffs adam_coeffs(double lr, double beta1, double beta2, double eps, double weight_decay,
                       bool decoupled, bool amsgrad, bool maximize, int64_t step);
SgdCoeffs sgd_coeffs(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                     bool first_step, bool maximize);

// p, m, v (and vmax with amsgrad; may be null otherwise) updated in place from g; n
// elements, any alignment. The widest path the CPU offers: AVX-512, AVX2+FMA, else scalar.
void adam_tile(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamCoeffs& c);
// buf is only touched when c.momentum != 0.
void sgd_tile(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c);

// The scalar versions (std::fma where PyTorch fuses), always available: tests compare the
// vector paths against them.
void adam_tile_scalar(float* p, const float* g, float* m, float* v, float* vmax, int64_t n,
                      const AdamCoeffs& c);
void sgd_tile_scalar(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c);

// Which path adam_tile/sgd_tile take on this CPU: "avx512", "avx2" or "scalar".
const char* update_math_isa();

}  // namespace mixprec::optim
