// backend/cpu/relu.h: ReLU forward and backward with PyTorch's NaN rule, on dense f32,
// bf16 and f16 tensors of any memory format. oneDNN 2.6's relu maps NaN to 0, which would
// hide a diverged model (a NaN weight would give a finite loss), so relu runs here.
//
// Semantics (PyTorch): relu(x) = x for x > 0 and for NaN, +0 otherwise (-0 included);
// backward from the output: diff_src = diff_dst where dst > 0 or dst is NaN, else +0.
// Both work on the raw bits (sign and exponent tests), so no value is rounded.
#pragma once

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// True when relu_forward/relu_backward take these tensors (dense f32/bf16/f16).
bool relu_supported(const Tensor& t);

Tensor relu_forward(const Tensor& src);
// dst: relu's output; diff_dst: same shape and dtype (brought to dst's layout).
Tensor relu_backward(const Tensor& diff_dst, const Tensor& dst);

}  // namespace mixprec::backend::cpu
