// tests/common/autograd_check.h: one differentiable op through the public API and the
// autograd engine, against central finite differences in float64 (f64 runs on
// backend/ref). Loss used: L = sum(op(inputs) * R) with a fixed random R, so every output
// element contributes with a different weight.
#pragma once
#include <gtest/gtest.h>

#include <functional>

#include "common/finite_diff.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec::test {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks d L / d inputs[i] for every input i that is floating.
// An op whose output is empty, or an input whose gradient is all zero on both sides, fails
// (gradients_match); pass AllZero::allowed when an input is meant not to reach the output.
inline void check_op(const char* name, const OpFn& op, std::vector<Tensor> inputs,
              double rtol = 1e-6 /* f64 central differences: ~1e-10 error, plenty of margin */,
              AllZero zeros = AllZero::reject) {
  SCOPED_TRACE(name);
  Tensor probe;
  {
    NoGradGuard ng;
    probe = op(inputs);
  }
  const Tensor weights = random_tensor(probe.shape(), 99);
  // Analytic: autograd.
  std::vector<Tensor> leaves;
  for (auto& t : inputs) {
    Tensor leaf = t.clone();
    if (is_floating(leaf.dtype())) leaf.requires_grad_(true);
    leaves.push_back(leaf);
  }
  Tensor loss = sum(mul(op(leaves), weights));
  loss.backward();
  // Numerical: the same op without autograd.
  test::ScalarFn f = [&](std::vector<Tensor>& xs) {
    NoGradGuard ng;
    return test::dot_f64(op(xs), weights);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_floating(inputs[i].dtype())) continue;
    SCOPED_TRACE("input " + std::to_string(i));
    ASSERT_TRUE(leaves[i].grad().defined());
    EXPECT_EQ(leaves[i].grad().dtype(), DType::f64);
    Tensor numeric = test::numerical_gradient(f, inputs, i);
    EXPECT_TRUE(test::gradients_match(leaves[i].grad(), numeric, rtol, zeros));
  }
}

}  // namespace mixprec::test
