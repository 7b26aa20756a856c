// op_inputs.h: a registered op's inputs as the tests that walk the registry make them (the op
// harness, the route test): floating inputs uniform in the entry's range with seed 1000 +
// their position, in `dtype`; class indices (k * 7 + 3) mod the entry's class count. With
// `with_grad`, the inputs a differentiable entry takes gradients for require them.
#pragma once

#include <vector>

#include "common/finite_diff.h"
#include "mixprec/core/tensor.h"
#include "ops/registry.h"

namespace mixprec::test {

inline std::vector<Tensor> op_inputs(const registry::OpEntry& e, DType dtype, bool with_grad = false) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const registry::InputSpec& s = e.inputs[i];
    if (s.classes > 0) {
      std::vector<int64_t> t(size_t(shape_numel(s.shape)));
      for (size_t k = 0; k < t.size(); ++k) t[k] = int64_t(k * 7 + 3) % s.classes;
      xs.push_back(Tensor::from_vector_i64(t, s.shape));
    } else {
      Tensor x = random_tensor(s.shape, 1000 + i, s.low, s.high, dtype);
      if (with_grad && e.differentiable && s.needs_grad) x.requires_grad_(true);
      xs.push_back(x);
    }
  }
  return xs;
}

}  // namespace mixprec::test
