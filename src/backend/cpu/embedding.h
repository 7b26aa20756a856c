// backend/cpu/embedding.h: the row gather of an embedding lookup and its scatter-add
// backward. Indices are checked by the caller (ops/embedding.cpp: each in [0, rows)).
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// out[i, :] = weight[idx[i], :] for a [rows, dim] weight of any floating dtype (a copy of
// the row's bytes: no rounding). Returns `shape` (whose element count is idx.size() * dim)
// in weight's dtype, contiguous.
Tensor embedding_forward(const Tensor& weight, const std::vector<int64_t>& idx, const Shape& shape);
// diff_weight[r, :] = sum of diff_dst[i, :] over every i with idx[i] == r, accumulated in
// f32 (f64 for f64) in the order of i and rounded once to `dtype`: a row looked up a
// thousand times in a bf16 model loses no gradient to bf16 sums (issue 14). diff_dst:
// idx.size() * dim elements in any shape and floating dtype. Rows never looked up get 0.
Tensor embedding_backward(const Tensor& diff_dst, const std::vector<int64_t>& idx, int64_t rows,
                          DType dtype);

}  // namespace mixprec::backend::cpu
