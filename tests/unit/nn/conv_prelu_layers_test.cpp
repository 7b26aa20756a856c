// conv_prelu_layers_test.cpp: nn::Conv1d, nn::ConvTranspose2d and nn::PReLU: PyTorch's
// parameter names, shapes and default initialisation bounds, forward equal to the op on the
// module's parameters, gradients reaching every parameter, and construction errors.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/amp/amp.h"
#include "mixprec/nn/nn.h"

namespace mixprec {
namespace {

void expect_within(const Tensor& t, double bound) {
  for (double v : t.to_vector_f64()) EXPECT_LE(std::fabs(v), bound);
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.to_vector_f64(), b.to_vector_f64());
}

TEST(Conv1dModule, ParametersAsPyTorch) {
  nn::Conv1d m(3, 5, 4, 2, 1);
  const auto params = m.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[0].second.shape(), (Shape{5, 3, 4}));
  EXPECT_EQ(params[1].first, "bias");
  EXPECT_EQ(params[1].second.shape(), (Shape{5}));
  expect_within(m.weight, 1.0 / std::sqrt(12.0));  // fan_in = 3 x 4
  expect_within(m.bias, 1.0 / std::sqrt(12.0));
  EXPECT_EQ(nn::Conv1d(3, 5, 4, 1, 0, 1, 1, /*bias=*/false).named_parameters().size(), 1u);
}

TEST(Conv1dModule, ForwardIsTheOpAndTrains) {
  nn::Conv1d m(3, 5, 4, 2, 1);
  const Tensor x = Tensor::uniform({2, 3, 9}, -1, 1);
  Tensor y = m(x);
  expect_same(y, conv1d(x, m.weight, m.bias, 2, 1));
  sum(y).backward();
  EXPECT_TRUE(m.weight.grad().defined());
  EXPECT_TRUE(m.bias.grad().defined());
  amp::AutocastGuard g(DType::bf16);
  EXPECT_EQ(m(x).dtype(), DType::bf16);  // conv1d's row: lower
}

TEST(ConvTranspose2dModule, ParametersAsPyTorch) {
  nn::ConvTranspose2d m(4, 3, 3, 2, 1, 1);
  const auto params = m.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[0].second.shape(), (Shape{4, 3, 3, 3}));  // [in, out, k, k]
  EXPECT_EQ(params[1].first, "bias");
  EXPECT_EQ(params[1].second.shape(), (Shape{3}));
  expect_within(m.weight, 1.0 / std::sqrt(27.0));  // PyTorch's fan_in: out x k x k
  expect_within(m.bias, 1.0 / std::sqrt(27.0));
}

TEST(ConvTranspose2dModule, UpsamplesAndTrains) {
  nn::ConvTranspose2d m(4, 3, 3, 2, 1, 1);
  const Tensor x = Tensor::uniform({2, 4, 5, 5}, -1, 1);
  Tensor y = m(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 10, 10}));  // (5 - 1) 2 - 2 + 3 + 1
  expect_same(y, conv_transpose2d(x, m.weight, m.bias, 2, 1, 1));
  sum(y).backward();
  EXPECT_TRUE(m.weight.grad().defined());
  EXPECT_TRUE(m.bias.grad().defined());
}

TEST(PReLUModule, OneWeightOrOnePerChannel) {
  nn::PReLU single;
  ASSERT_EQ(single.named_parameters().size(), 1u);
  EXPECT_EQ(single.named_parameters()[0].first, "weight");
  EXPECT_EQ(single.weight.to_vector(), (std::vector<float>{0.25f}));
  nn::PReLU per_channel(3, 0.1);
  EXPECT_EQ(per_channel.weight.shape(), (Shape{3}));
  const Tensor x = Tensor::from_vector({-1.0f, 2.0f, -4.0f}, {1, 3});
  Tensor y = per_channel(x);
  const std::vector<float> v = y.to_vector();
  EXPECT_FLOAT_EQ(v[0], -0.1f);
  EXPECT_FLOAT_EQ(v[1], 2.0f);
  EXPECT_FLOAT_EQ(v[2], -0.4f);
  sum(y).backward();
  EXPECT_TRUE(per_channel.weight.grad().defined());
  EXPECT_THROW(per_channel(Tensor::zeros({1, 4})), Error);  // 3 weights, 4 channels
}

TEST(ConvModules, BadArgumentsAreErrors) {
  EXPECT_THROW(nn::Conv1d(0, 5, 3), Error);
  EXPECT_THROW(nn::Conv1d(3, 5, 3, 1, 0, 0), Error);     // dilation 0
  EXPECT_THROW(nn::Conv1d(4, 5, 3, 1, 0, 1, 2), Error);  // 5 outputs in 2 groups
  EXPECT_THROW(nn::ConvTranspose2d(4, 3, 0), Error);
  EXPECT_THROW(nn::ConvTranspose2d(3, 4, 3, 1, 0, 0, 2), Error);  // 3 inputs in 2 groups
  EXPECT_THROW(nn::PReLU(0), Error);
}

}  // namespace
}  // namespace mixprec
