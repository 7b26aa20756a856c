// backend/cpu/layout.h: the copies attention's layout ops need (ops/attention.cpp): a
// permuting copy of a 4-D tensor with an optional scale folded in (splitting and merging
// heads, scaling Q), the gradient of taking rows, cat's chunked copies and the dtype
// conversion behind cast. Outputs are new tensors.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// scale * src.permute(perm), contiguous; src 4-D, any strides. scale == 1 moves bits only;
// otherwise each element is scaled in f32 (f64 in f64) and rounded once to the dtype.
Tensor permute_forward(const Tensor& src, const std::array<int, 4>& perm, double scale);
// p[0, n) (dtype dt) *= scale, each element rounded once: in f32 (f64 in f64). The one
// definition of the scale permute_forward folds in (flash attention's dQ uses it too).
void scale_elements(void* p, DType dt, int64_t n, double scale);

// Zeros of shape `full` with diff_dst's values at rows [start, start + diff_dst rows)
// (row: elements per row of dim 0).
Tensor narrow_rows_backward(const Tensor& diff_dst, const Shape& full, int64_t start, int64_t row);

// Joins contiguous inputs of one dtype (sizes equal except in dim d) along d: for each of
// the `outer` leading index tuples, each input contributes one contiguous chunk.
Tensor cat_forward(const std::vector<Tensor>& inputs, int64_t d);
// The forward copy in reverse: a gradient of shapes[t] for each t with needs[t] (others
// undefined).
std::vector<Tensor> cat_backward(const Tensor& diff_dst, const std::vector<Shape>& shapes,
                                 const std::vector<bool>& needs, int64_t d);

// src's values in dtype (round to nearest even), same shape and strides; src dense.
Tensor convert_dense(const Tensor& src, DType dtype);

}  // namespace mixprec::backend::cpu
