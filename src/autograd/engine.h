// autograd/engine.h: the backward pass (engine.cpp), as Tensor::backward
// (src/ops/tensor_backward.cpp) runs it.
#pragma once
#include "mixprec/core/tensor.h"

namespace mixprec {

// Runs backward from root with seed (root's shape and dtype): each node once, in reverse
// topological order, leaves accumulating into .grad. Two gradients that reach the same node
// are summed with `sum` (ops' add, handed down by Tensor::backward: autograd comes before ops
// in the layers, so the engine cannot call it itself). The caller has turned grad mode and
// autocast off.
using GradientSum = Tensor (*)(const Tensor&, const Tensor&);
void run_backward(const Tensor& root, const Tensor& seed, GradientSum sum);

}  // namespace mixprec
