// update_kernels.h: the elementwise parameter updates, one pass over each tensor, in the
// order and rounding of PyTorch 1.13's single-tensor implementations (bit-identical for f32).
// Each pass can also unscale the gradient as it reads it (any of f32/bf16/f16) and write
// the updated parameter rounded to 16 bits: the fused mixed-precision step.
#pragma once
#include <string>

#include "mixprec/optim/optim.h"
#include "mixprec/core/tensor.h"

namespace mixprec::optim {

// param: f32, f64, bf16 or f16, dense. in.grad: param's shape and strides, and param's dtype
// or (f32 param) bf16/f16. State tensors: param's dtype and layout. in.rounded_out (f32 param
// only): bf16/f16 with param's strides. A 16-bit param needs in.grad_scale == 1. lr is the
// optimizer's current one (o.lr is ignored). Bit-identical to PyTorch 1.13's single-tensor
// step for f32 parameters (update_math.h); 16-bit parameters and state are widened to f32,
// updated by the same formula and rounded back once.
// buf is only read or written when o.momentum != 0.
void sgd_update(Tensor& param, const UpdateInput& in, Tensor& buf, double lr, const SGDOptions& o,
                bool first_step);

// step is 1-based (after increment), as PyTorch's state['step']. max_exp_avg_sq is only
// read or written when o.amsgrad.
void adam_update(Tensor& param, const UpdateInput& in, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor& max_exp_avg_sq, double lr, const AdamOptions& o, bool decoupled, int64_t step);

// grad converted to param's dtype and layout and multiplied by scale in that dtype: the
// two-pass equivalent of what the fused kernels read (Optimizer's default update_fused).
Tensor scaled_grad_like(const Tensor& param, const Tensor& grad, float scale);

// A checkpointed state tensor copied into a fresh buffer laid out like `param` (dtype and
// memory format), charged to optimizer state; invalid_argument naming `name` on a shape
// mismatch.
Tensor restored_like(const Tensor& param, const Tensor& src, const std::string& name);

}  // namespace mixprec::optim
