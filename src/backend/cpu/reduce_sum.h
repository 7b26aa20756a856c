// backend/cpu/reduce_sum.h: sum and mean over axes that are not one trailing run, where
// oneDNN 2.6 has only its reference reduction (ref:any, ~12 ns an element: 5 ms for
// [50, 256, 32] over dim 0 or dims {0, 2}, against 0.09 ms over dim 2 on its jit kernel).
// Those are the common ones outside a model file: a broadcast add's gradient (a bias [C, 1]
// added to [T, C, B]: sum over dims 0 and 2), a batch's sum or mean over dim 0.
// Each output element is summed in f32 by one thread in a fixed order (rows of a reduced
// run in order; a trailing reduced run in 16 lane partials added at the end), so the bits
// depend on the shape only, not on the thread count. bf16 is widened exactly and the result
// rounded once.
#pragma once
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// True for what reduce_sum takes: f32 or bf16, contiguous, and axes that after merging
// neighbouring dims are not a single trailing run (oneDNN's jit kernel does those well).
bool reduce_sum_applies(const Tensor& src, const std::vector<int64_t>& axes);

// sum (mean: divided by the count) of src over `axes` (sorted, unique), keepdim as the
// ops' reduce; src's dtype out.
Tensor reduce_sum(const Tensor& src, const std::vector<int64_t>& axes, bool keepdim, bool mean);

}  // namespace mixprec::backend::cpu
