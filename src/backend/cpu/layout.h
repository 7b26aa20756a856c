// backend/cpu/layout.h: the copies attention's layout ops need (ops/attention.cpp): a
// permuting copy of a 4-D tensor with an optional scale folded in (splitting and merging
// heads, scaling Q), and the gradient of taking rows. Any floating dtype; outputs are new
// contiguous tensors.
#pragma once
#include <array>
#include <cstdint>

#include "mixprec/tensor.h"

namespace mixprec::backend::cpu {

// scale * src.permute(perm), contiguous; src 4-D, any strides. scale == 1 moves bits only;
// otherwise each element is scaled in f32 (f64 in f64) and rounded once to the dtype.
Tensor permute_forward(const Tensor& src, const std::array<int, 4>& perm, double scale);

// Zeros of shape `full` with diff_dst's values at rows [start, start + diff_dst rows)
// (row: elements per row of dim 0).
Tensor narrow_rows_backward(const Tensor& diff_dst, const Shape& full, int64_t start, int64_t row);

}  // namespace mixprec::backend::cpu
