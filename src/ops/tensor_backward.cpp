// ops/tensor_backward.cpp: Tensor::backward, the user's entry to autograd. It checks the seed
// gradient, turns grad mode and autocast off, and runs autograd's engine (run_backward,
// src/autograd/engine.cpp) with ops' add to sum two gradients that reach the same node: the
// engine comes before ops in the layers (docs/design.md), so it is handed the op here.
#include "autograd/engine.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"
#include "ops/autocast_hook.h"

namespace mixprec {

void Tensor::backward(const Tensor& gradient) const {
  if (!requires_grad())
    throw Error(Status::invalid_argument("backward: " + str() +
                                         " does not require grad (no input requires grad, or "
                                         "it was computed under NoGradGuard)"));
  Tensor seed = gradient;
  if (!seed.defined()) {
    if (numel() != 1)
      throw Error(Status::invalid_argument(
          "backward: gradient can be implicitly created only for scalar outputs, got " +
          shape_str(shape()) + "; pass a gradient of that shape"));
    seed = Tensor::ones(shape(), dtype());
  } else if (seed.shape() != shape()) {
    throw Error(Status::invalid_argument("backward: gradient shape " + shape_str(seed.shape()) +
                                         " does not match output shape " + shape_str(shape())));
  }
  if (seed.dtype() != dtype()) {
    NoGradGuard ng;
    seed = seed.to(dtype());
  }
  NoGradGuard ng;  // backward itself records nothing
  // Backward runs each op in the dtypes its forward used, never re-cast by autocast.
  ops_detail::AutocastOff no_autocast;
  run_backward(*this, seed, [](const Tensor& a, const Tensor& b) { return add(a, b); });
}

}  // namespace mixprec
