// normalization_layers_test.cpp: the LayerNorm, BatchNorm2d, GELU and Dropout modules
// (PyTorch defaults, running statistics, the O2 normalisation marker).
#include "mixprec/ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/tensor_checks.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/nn.h"

namespace mixprec {
namespace {

using test::bits_equal;
using test::error_of;
using test::expect_all_near;
using test::f64;

// batch_norm's input [2, 2, 1, 3] (as in norm_test.cpp)
const std::vector<double> kBnInput = {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60};

// ---- modules ----

TEST(NormalizationLayers, LayerNormHasPyTorchDefaults) {
  nn::LayerNorm ln({4});
  const auto params = ln.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  expect_all_near(ln.weight, {1, 1, 1, 1}, 0.0);
  expect_all_near(ln.bias, {0, 0, 0, 0}, 0.0);
  EXPECT_TRUE(ln.weight.requires_grad());
  expect_all_near(ln(Tensor::from_vector({1, 2, 3, 4}, {1, 4})),
                  {-1.5 / std::sqrt(1.25 + 1e-5), -0.5 / std::sqrt(1.25 + 1e-5),
                   0.5 / std::sqrt(1.25 + 1e-5), 1.5 / std::sqrt(1.25 + 1e-5)},
                  1e-6 /* f32 output */);
  EXPECT_TRUE(nn::LayerNorm({4}, 1e-5, false).named_parameters().empty());
}

TEST(NormalizationLayers, BatchNorm2dTracksRunningStatsOnlyInTraining) {
  nn::BatchNorm2d bn(2);
  EXPECT_EQ(bn.named_parameters().size(), 2u);  // running stats are buffers, not parameters
  EXPECT_FALSE(bn.running_mean.requires_grad());
  const Tensor x = Tensor::from_vector_f64(kBnInput, {2, 2, 1, 3}, DType::f32);
  bn(x);
  expect_all_near(bn.running_mean, {0.35, 3.5}, 1e-6);
  expect_all_near(bn.running_var, {1.25, 35.9}, 1e-5);
  bn.eval();
  const Tensor y = bn(x);
  expect_all_near(bn.running_mean, {0.35, 3.5}, 1e-6);  // unchanged in eval
  EXPECT_NEAR(y.at(0), (1.0 - 0.35) / std::sqrt(1.25 + 1e-5), 1e-6);
  EXPECT_NE(error_of([&] {
              bn(Tensor::zeros({2, 3, 1, 1}));
            }).find("BatchNorm2d: input [2, 3, 1, 1]"),
            std::string::npos);
}

TEST(NormalizationLayers, DropoutAndGeluModules) {
  nn::Dropout d(0.5);
  const Tensor x = Tensor::ones({100});
  d.eval();
  EXPECT_TRUE(d(x).same(x));
  d.train();
  EXPECT_FALSE(bits_equal(d(x), x));
  nn::GELU g;
  EXPECT_NEAR(g(Tensor::from_vector({1.f}, {1})).item(), 0.841344746068543, 1e-7);
  EXPECT_NE(error_of([] { nn::Dropout bad(1.0); }).find("Dropout: p"), std::string::npos);
}

TEST(NormalizationLayers, NormalizationMarker) {
  nn::Sequential net{std::make_shared<nn::Conv2d>(1, 2, 3),
                     std::make_shared<nn::BatchNorm2d>(2),
                     std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::LayerNorm>(Shape{8}),
                     std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Dropout>(0.1)};
  std::vector<std::string> norms;
  for (const auto& [name, m] : net.named_modules())
    if (nn::is_normalization_layer(*m)) norms.push_back(name);
  EXPECT_EQ(norms, (std::vector<std::string>{"1", "4"}));
  EXPECT_FALSE(nn::is_normalization_layer(net));
}

}  // namespace
}  // namespace mixprec
