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

// Row buffers of add_row, reused from row to row.
struct AddRowScratch {
  std::vector<float> fa, fb;
  std::vector<double> da, db;
};

// out[0, d) = a + b rounded once to out_dt (the forward's residual sum; the backward's join of
// the stream's gradient with the norm's). out may be a. Three routes, all giving the bits of
// the exact sum rounded once:
//  - f32 + (f32, bf16, f16) into f32: the 16-bit row widened exactly, then f32 adds (what
//    add's promote cast and its f32 kernel give).
//  - bf16 + bf16 into bf16, f16 + f16 into f16 (the O2 stream): widened to f32, one f32 add,
//    one rounding to the 16-bit type. The f32 sum is rounded, but a second rounding after a
//    first to q bits is harmless for the sum of two p-bit values when q >= 2p + 1 (Figueroa,
//    "When is double rounding innocuous?", 1995): p = 8 (bf16) or 11 (f16), q = 24. In short:
//    if the exact sum needs more than 24 bits, the operands' exponents differ by at least
//    24 - p >= p + 2, so the smaller one is below a quarter ulp of the larger one's 16-bit
//    ulp: the sum lies strictly inside the larger operand's rounding interval, away from the
//    midpoints (numbers of p + 1 bits, which f32 holds exactly), and rounding to f32 cannot
//    carry it onto or past one. Off the normal range nothing changes: a sum in f32's (or
//    f16's) subnormal range is exact in f32, and f32 overflows only past the point where the
//    16-bit rounding overflows too. add_row_test checks it against the double route on every
//    bf16 pair over a dense set of exponents (subnormals, inf, NaN, signed zeros included).
//  - every other mix: in double, rounded once (through round-to-odd f32 for 16-bit outputs).
void add_row(const void* a, DType adt, const void* b, DType bdt, void* out, DType out_dt, int64_t d,
             AddRowScratch& s);

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
