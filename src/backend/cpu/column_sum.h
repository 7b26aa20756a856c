// backend/cpu/column_sum.h: the f32 sums of a matrix's columns, the bias gradient of a
// linear layer (diff_bias[o] = sum over rows n of diff_dst[n, o]).
// Why our own: linear.cpp runs the weight gradient as a oneDNN matmul, which has no
// diff_bias output; oneDNN's reduction over the row axis of a bf16 matrix would need an f32
// copy first. This reads each element once and accumulates in f32 (bf16 is widened
// exactly): rows in order within chunks of 256 rows, then the chunks' sums in order, so the
// result depends on the shape only, not on the thread count.
#pragma once
#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// x: 2-D [N, O], contiguous, f32 or bf16. Returns f32 [O].
Tensor column_sums_f32(const Tensor& x);

}  // namespace mixprec::backend::cpu
