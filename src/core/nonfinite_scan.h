// core/nonfinite_scan.h: the fused "multiply by 1/scale and look for inf/NaN" pass over one
// gradient (PyTorch's _amp_foreach_non_finite_check_and_unscale_), and the read-only check
// that comes before a fused optimizer step (which unscales as it reads instead), and that a
// checkpoint's tensors get before a resume trusts them. In core, below its users: amp's
// GradScaler and io's checkpoint checks both scan, and io comes before amp in the layers.
#pragma once
#include <cstdint>

#include "mixprec/core/tensor.h"

namespace mixprec {

struct UnscaleResult {
  int64_t nonfinite = 0;     // elements that were inf/NaN before scaling
  int64_t first_index = -1;  // flat index (buffer order) of the first one
};

// grad *= inv_scale in place (f32, f64, bf16, f16), counting non-finite elements.
UnscaleResult unscale_and_check(Tensor& grad, float inv_scale);

// Counts the non-finite elements of grad (f32, f64, bf16, f16) without writing it.
UnscaleResult find_nonfinite(const Tensor& grad);

}  // namespace mixprec
