// backend/cpu/softmax_rows.h: softmax over the last dim of a 16-bit (or f32) tensor with f32
// arithmetic inside, reading and writing the tensor's own dtype: the attention softmax.
// Why: under autocast the attention scores come out of a bf16 matmul and the
// probabilities go into another one. The fp32 policy route (cast to f32, f32 softmax, cast
// back for the next matmul; the reverse in backward) moves the [B*H, S, S] tensor six
// times more than this does, and oneDNN 2.6's own bf16 softmax rounds intermediates to
// bf16 (softmax.cpp). This keeps the arithmetic in f32 and rounds once on the way out.
// Semantics:
// - forward: y = exp(x - max) / sum(exp(x - max)) per row, in f32, rounded once to dtype.
// - backward: dx = y * (dy - sum(dy * y)) in f32 from the stored (rounded) y, rounded once.
// - Non-finite rows follow IEEE arithmetic as PyTorch's kernel does: a NaN anywhere or a
//   +inf makes the row NaN; -inf entries (masks) get probability 0; an all -inf row is NaN.
#pragma once
#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// x: contiguous, f32/bf16/f16, at least 1-D; rows are the last dim. Returns y like x.
// causal: x is [..., S, S] (attention scores) and row i of each S x S block sees only
// columns 0..i: the others get probability exactly 0 and take no part in the max or the sum
// (as a -inf mask would, without writing one). Backward needs no flag: y is 0 there.
Tensor softmax_rows_forward(const Tensor& x, bool causal = false);

// y: the forward's output; dy: y's shape and dtype (contiguous). Returns dx like y.
Tensor softmax_rows_backward(const Tensor& y, const Tensor& dy);

}  // namespace mixprec::backend::cpu
