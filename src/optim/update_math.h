// update_math.h: the per-element f32 update formulas of SGD and Adam over one tile of
// contiguous floats, in PyTorch 1.13's single-tensor order (separate multiplies and adds, no
// FMA). An AVX-512 version is picked at run time; it gives the scalar loop's bits exactly,
// since every step (mul, add, div, sqrt) is one correctly rounded IEEE operation either way.
#pragma once
#include <cstdint>

namespace mixprec::optim {

// Adam/AdamW constants as the loop uses them, already rounded to f32.
struct AdamCoeffs {
  float beta1 = 0, one_minus_beta1 = 0;  // 1 - beta1 computed in f32, as PyTorch's (1 - beta1)
  float beta2 = 0, one_minus_beta2 = 0;
  float eps = 0;
  float weight_decay = 0;   // Adam: g += wd * p when != 0
  float decay = 1;          // AdamW: p *= (1 - lr * wd) first
  float neg_step_size = 0;  // -(lr / bias_correction1)
  float bc2_sqrt = 1;       // sqrt(bias_correction2)
  bool decoupled = false;
};

// SGD constants, rounded to f32.
struct SgdCoeffs {
  float neg_lr = 0;
  float momentum = 0;             // 0: no buffer
  float one_minus_dampening = 1;  // 1 - dampening in f32
  float weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // the buffer starts as the first gradient (PyTorch's clone)
};

// p, m, v updated in place from g; n elements, any alignment.
void adam_tile(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c);
// buf is only touched when c.momentum != 0.
void sgd_tile(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c);

// The scalar versions, always available (tests compare the vector path against them).
void adam_tile_scalar(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c);
void sgd_tile_scalar(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c);

}  // namespace mixprec::optim
