// backend/cpu/residual_layer_norm.h: the kernels of add_layer_norm (mixprec/ops/ops_fused.h): a
// residual add, the LayerNorm of the sum and the rounding of the normalised rows to the dtype
// the next GEMM reads, in one pass over the rows; and its backward, which adds the stream's
// own gradient to LayerNorm's input gradient and rounds the branch's share, in one pass too.
// Why: under autocast the unfused route (add, layer_norm, the linear's cast) makes four
// passes over the activation forward (the branch widened to f32, the add, the norm, the
// bf16 cast) and four backward (the cast's gradient, the norm's backward, the engine's add
// of the two gradients, the bf16 rounding for the branch); here each row stays in L1.
// Values: the same roundings as the unfused route, in the same order (the sum rounded to
// the sum's dtype, LayerNorm in double on layer_norm_rows, rounded to the sum's dtype, then
// converted), so on f32 streams the results are bit-identical to it (tests/unit/ops/
// add_layer_norm_test.cpp checks); the weight/bias shares are summed per thread over static
// row blocks, as layer_norm_backward does.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/norm.h"
#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

struct ResidualLayerNormForward {
  Tensor sum;     // x + branch, in sum_dtype (x itself when branch is undefined)
  Tensor normed;  // layer_norm(sum) rounded to sum_dtype, then converted to normed_dtype
};

// x, branch: contiguous, same shape (branch may be undefined: no add); rows of d values;
// w, b: d doubles. Fills stats (per row mean and rstd of the sum).
ResidualLayerNormForward residual_layer_norm_forward(const Tensor& x, const Tensor& branch, DType sum_dtype,
                                                     DType normed_dtype, int64_t d, const std::vector<double>& w,
                                                     const std::vector<double>& b, double eps,
                                                     LayerNormStats& stats);

struct ResidualLayerNormGrads {
  Tensor dsum;                 // d_sum + layer_norm's input gradient, in sum's dtype
  Tensor dbranch;              // the same values rounded to branch_dtype (when asked)
  std::vector<double> dw, db;  // d values each (zeros unless need_wb)
};

// sum: the forward's sum; d_normed (any floating dtype) and d_sum (sum's dtype) contiguous,
// either may be undefined (no gradient reached that output). need_branch: also write dsum
// rounded to branch_dtype.
ResidualLayerNormGrads residual_layer_norm_backward(const Tensor& sum, const Tensor& d_normed, const Tensor& d_sum,
                                                    int64_t d, const std::vector<double>& w,
                                                    const LayerNormStats& stats, bool need_branch,
                                                    DType branch_dtype, bool need_wb);

}  // namespace mixprec::backend::cpu
