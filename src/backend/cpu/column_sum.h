// backend/cpu/column_sum.h: the f32 sums of a matrix's columns, the bias gradient of a
// linear layer (diff_bias[o] = sum over rows n of diff_dst[n, o]).
// Why our own: linear.cpp runs the weight gradient as a oneDNN matmul, which has no
// diff_bias output; oneDNN's reduction over the row axis of a bf16 matrix would need an f32
// copy first. This reads each element once and accumulates in f32 (bf16 is widened
// exactly): rows in order within chunks of 256 rows, then the chunks' sums in order, so the
// result depends on the shape only, not on the thread count.
// transpose_with_column_sums does the same sums in the same order while it writes the
// transpose: linear.cpp's weight gradient reads diff_dst^T as a plain [O,N] operand where
// oneDNN's matmul is faster that way (the measured shapes are in linear.cpp's banner), and
// the bias gradient then costs no pass of its own, with the same bits as column_sums_f32.
#pragma once
#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// x: 2-D [N, O], contiguous, f32 or bf16. Returns f32 [O].
Tensor column_sums_f32(const Tensor& x);

struct TransposeWithSums {
  Tensor transposed;  // [O, N], x's dtype, contiguous
  Tensor sums;        // f32 [O], bit-identical to column_sums_f32(x); undefined unless asked
};
// x: 2-D [N, O], contiguous, f32 or bf16. One read of x writes x^T and, with `sums`, the
// column sums.
TransposeWithSums transpose_with_column_sums(const Tensor& x, bool sums);

}  // namespace mixprec::backend::cpu
