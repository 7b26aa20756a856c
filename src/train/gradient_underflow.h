// gradient_underflow.h: a step's gradient-underflow telemetry (GradientUnderflow, run_dir.h)
// from its named gradients: each counted against f16's range (mixprec/core/f16_range.h) as it
// is, still scaled, and the most affected tensors kept by name.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "mixprec/io/run_dir.h"
#include "mixprec/core/tensor.h"

namespace mixprec::train {

// Undefined gradients (a parameter backward did not reach) are skipped. worst: tensors with
// any subnormal or flushed element, by subnormal + flushed, descending (ties keep the given
// order), the first GradientUnderflow::kMaxNames.
GradientUnderflow count_gradient_underflow(const std::vector<std::pair<std::string, Tensor>>& named_grads);

}  // namespace mixprec::train
