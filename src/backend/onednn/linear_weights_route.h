// backend/onednn/linear_weights_route.h: the two ways linear_backward_weights can run its
// product diff_weights [O,K] = diff_dst^T [O,N] x src [N,K], and the choice between them
// (linear.cpp's banner gives the measurements behind it):
//   strided:    diff_dst^T read through its strides by oneDNN's matmul (a transposed A),
//               the bias gradient a separate column-sum pass (cpu::column_sums_f32);
//   transposed: one pass writes diff_dst^T to a scratch [O,N] and the bias gradient with it
//               (cpu::transpose_with_column_sums, the same bits), then the matmul reads a
//               plain A, which brgemm runs faster on some shapes.
// Declared here, not in kernels.h, so that tests can check both routes on every shape and
// the route probe can time them; everything else calls linear_backward_weights.
#pragma once
#include <cstdint>

#include "backend/kernels.h"

namespace mixprec::backend::onednn {

enum class WeightsRoute { strided, transposed };

// The route linear_backward_weights takes for N rows, K inputs, O outputs in dtype `dt`
// (f32 or bf16). It depends on the shape only (measured the same way on one and two threads).
WeightsRoute weights_route(int64_t N, int64_t K, int64_t O, DType dt);

// linear_backward_weights on the given route (same checks, same results up to oneDNN's
// rounding of the product; the bias gradient bit-identical).
WeightGrads linear_backward_weights_on(WeightsRoute route, const Tensor& src, const Tensor& diff_dst,
                                       bool with_bias);

}  // namespace mixprec::backend::onednn
