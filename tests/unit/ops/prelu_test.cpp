// prelu_test.cpp: prelu's values and gradients at the points a random harness input never
// hits, against PyTorch 1.13 (values from F.prelu, noted below): x = 0 (PyTorch's gradient
// there is the weight), NaN, a bf16 input with an f32 weight (bf16 out).
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

// x = [0, -1, 2], weight [0.25]: PyTorch gives y = [0, -0.25, 2], x.grad = [0.25, 0.25, 1],
// weight.grad = [-1] for loss sum(y).
TEST(Prelu, GradientsAtZeroAsPyTorch) {
  Tensor x = Tensor::from_vector({0.0f, -1.0f, 2.0f}, {3}).requires_grad_(true);
  Tensor w = Tensor::from_vector({0.25f}, {1}).requires_grad_(true);
  const Tensor y = prelu(x, w);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0.0f, -0.25f, 2.0f}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0.25f, 0.25f, 1.0f}));
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{-1.0f}));
}

TEST(Prelu, NanStaysNan) {
  const Tensor y = prelu(Tensor::from_vector({std::nanf(""), -2.0f}, {1, 2}), Tensor::from_vector({0.5f, 0.5f}, {2}));
  const std::vector<float> v = y.to_vector();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], -1.0f);
}

// PyTorch 1.13: F.prelu(bf16 input, f32 weight).dtype == bfloat16.
TEST(Prelu, WeightTakesTheInputsDtype) {
  const Tensor x = Tensor::uniform({2, 3, 4}, -1, 1).to(DType::bf16);
  EXPECT_EQ(prelu(x, Tensor::full({3}, 0.25)).dtype(), DType::bf16);
  EXPECT_EQ(prelu(x.to(DType::f32), Tensor::full({1}, 0.25, DType::bf16)).dtype(), DType::f32);
}

}  // namespace
}  // namespace mixprec
