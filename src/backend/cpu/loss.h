// backend/cpu/loss.h: the classification losses in float64, forward and backward, and argmax.
// Rows are independent and each is summed serially, so the results do not depend on the
// thread count. Targets are class indices checked by the caller (ops/loss.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// Per row: -log_probs[i, t_i]. lp: [N, C] f32 or f64. Returns N values.
std::vector<double> nll_rows(const Tensor& lp, const std::vector<int64_t>& t);
// d/d lp[i, t_i] = -g_i (/N for mean), zero elsewhere: [N, C] in dtype. g: the loss's
// gradient (N values when per_row, else one).
Tensor nll_backward(const std::vector<double>& g, bool per_row, bool mean,
                    const std::vector<int64_t>& t, int64_t N, int64_t C, DType dtype);

// Per row: lse_i - x[i, t_i] with lse_i = m + log(sum exp(x - m)) (a NaN makes the row NaN).
// x: [N, C] contiguous, any floating dtype; lse receives the N log-sum-exps.
std::vector<double> cross_entropy_rows(const Tensor& x, const std::vector<int64_t>& t,
                                       std::vector<double>& lse);
// g_i * (exp(x - lse_i) - onehot(t_i)) (/N for mean), [N, C] in x's dtype.
Tensor cross_entropy_backward(const Tensor& x, const std::vector<double>& g, bool per_row,
                              bool mean, const std::vector<int64_t>& t,
                              const std::vector<double>& lse);

// Index of the first maximum of each row of [N, C] -> [N] i64.
Tensor argmax_rows(const Tensor& src);

}  // namespace mixprec::backend::cpu
