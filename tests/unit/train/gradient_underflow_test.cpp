// gradient_underflow_test.cpp: a step's gradient-underflow telemetry from named gradients
// (train/gradient_underflow.h): totals over every gradient, the tensors with any subnormal or
// flushed element counted, the worst kept by name (most affected first, ties in the given
// order, at most GradientUnderflow::kMaxNames), undefined gradients skipped. Counts worked
// out by hand from f16's thresholds (2^-25 flushed, below 2^-14 subnormal).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "train/gradient_underflow.h"

namespace mixprec::train {
namespace {

Tensor grad(std::vector<double> v) { return Tensor::from_vector_f64(v, {int64_t(v.size())}, DType::f32); }

TEST(GradientUnderflow, TotalsAndTheWorstTensorsByName) {
  std::vector<std::pair<std::string, Tensor>> g = {
      {"conv1.weight", grad({1.0, 0x1p-20, 0x1p-26})},           // 1 subnormal, 1 flushed
      {"conv1.bias", grad({0.5, 0.25})},                         // clean
      {"fc.weight", grad({0x1p-16, 0x1p-17, 0x1p-18, 0x1p-30})},  // 3 subnormal, 1 flushed
      {"fc.bias", Tensor()},                                     // no gradient this step
      {"head.weight", grad({0x1p-15, 0x1p-40})},                 // 1 + 1: ties conv1.weight
  };
  const GradientUnderflow u = count_gradient_underflow(g);
  EXPECT_EQ(u.values, 3 + 2 + 4 + 2);
  EXPECT_EQ(u.subnormal, 1 + 3 + 1);
  EXPECT_EQ(u.flushed, 1 + 1 + 1);
  EXPECT_EQ(u.tensors, 3);
  ASSERT_EQ(u.worst.size(), 3u);
  EXPECT_EQ(u.worst[0].name, "fc.weight");
  EXPECT_EQ(u.worst[0].values, 4);
  EXPECT_EQ(u.worst[0].subnormal, 3);
  EXPECT_EQ(u.worst[0].flushed, 1);
  EXPECT_EQ(u.worst[1].name, "conv1.weight");  // tied with head.weight: given order
  EXPECT_EQ(u.worst[2].name, "head.weight");
}

TEST(GradientUnderflow, KeepsAtMostEightNamesButCountsEveryTensor) {
  std::vector<std::pair<std::string, Tensor>> g;
  for (int i = 0; i < 12; ++i) {
    std::vector<double> v(size_t(i + 1), 0x1p-20);  // layer i: i + 1 subnormal values
    g.emplace_back("layer" + std::to_string(i) + ".weight", grad(v));
  }
  const GradientUnderflow u = count_gradient_underflow(g);
  EXPECT_EQ(u.tensors, 12);
  EXPECT_EQ(u.subnormal, 12 * 13 / 2);
  EXPECT_EQ(u.flushed, 0);
  ASSERT_EQ(u.worst.size(), GradientUnderflow::kMaxNames);
  EXPECT_EQ(u.worst.front().name, "layer11.weight");
  EXPECT_EQ(u.worst.back().name, "layer4.weight");
}

TEST(GradientUnderflow, CleanGradientsNameNothing) {
  const GradientUnderflow u = count_gradient_underflow({{"w", grad({1.0, -2.0, 0.0})}});
  EXPECT_EQ(u.values, 3);
  EXPECT_EQ(u.subnormal + u.flushed + u.tensors, 0);
  EXPECT_TRUE(u.worst.empty());
}

}  // namespace
}  // namespace mixprec::train
