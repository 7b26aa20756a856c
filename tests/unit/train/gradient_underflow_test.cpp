// gradient_underflow_test.cpp: a step's gradient-underflow telemetry from named gradients
// (train/gradient_underflow.h): totals over every gradient, the tensors with any subnormal or
// flushed element counted, the worst kept by name (most affected first, ties in the given
// order, at most GradientUnderflow::kMaxNames), undefined gradients skipped. Counts worked
// out by hand from f16's thresholds (2^-25 flushed, below 2^-14 subnormal). And in a real
// amp-fp16 step (PrecisionStep): the count is of the gradients as the scaled backward left
// them, before the scaler unscales them, only at the step that asked, and only for presets
// whose gradients pass through f16.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/data/data.h"
#include "mixprec/core/f16_range.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "train/gradient_underflow.h"
#include "train/precision_step.h"

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

TEST(GradientUnderflow, AnAmpFp16StepCountsItsScaledGradientsBeforeUnscaling) {
  // Loss scale 2^-10: small gradients fall under f16's range. Unfused, the scaler unscales
  // .grad in place (x 1024, exact for a power of two), so after the step each gradient is
  // the scaled one times 1024, and counting it at scale 2^-10 recounts what backward made.
  TrainConfig c;
  c.init_scale = 0x1p-10;
  manual_seed(0);
  PrecisionStep step(amp::preset_by_name("amp-fp16").value(), std::make_shared<nn::Cnn>(1, 8, 8, 10), c);
  step.set_fused_update(false);
  ASSERT_TRUE(step.counts_underflow());
  DataLoader loader(make_synthetic(16, 1, 8, 8, 10, 1), {.batch_size = 8, .shuffle = false, .prefetch = 0});
  std::vector<Batch> b1{*loader.next()}, b2{*loader.next()};
  step.count_underflow_next_step();
  const PrecisionStep::Outcome out = step.run(b1);
  ASSERT_TRUE(out.stepped);
  ASSERT_TRUE(out.underflow.has_value());
  int64_t values = 0, subnormal = 0, flushed = 0;
  for (const auto& [name, p] : step.model().named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const F16RangeCounts e = count_f16_range(p.grad(), float(0x1p-10));
    values += e.values, subnormal += e.subnormal, flushed += e.flushed;
  }
  EXPECT_EQ(out.underflow->values, values);
  EXPECT_EQ(out.underflow->subnormal, subnormal);
  EXPECT_EQ(out.underflow->flushed, flushed);
  EXPECT_GT(subnormal + flushed, 0);  // the scale did push values under 2^-14
  ASSERT_FALSE(out.underflow->worst.empty());
  const auto named = step.model().named_parameters();
  for (const auto& w : out.underflow->worst)
    EXPECT_TRUE(std::any_of(named.begin(), named.end(), [&](const auto& n) { return n.first == w.name; })) << w.name;
  EXPECT_FALSE(step.run(b2).underflow.has_value());  // counted only when asked, once
  // bf16 keeps f32's exponent range: nothing to count against f16's.
  PrecisionStep bf16(amp::preset_by_name("amp-bf16").value(), std::make_shared<nn::Cnn>(1, 8, 8, 10), c);
  EXPECT_FALSE(bf16.counts_underflow());
  EXPECT_TRUE(PrecisionStep(amp::preset_by_name("o2-fp16").value(), std::make_shared<nn::Cnn>(1, 8, 8, 10), c)
                  .counts_underflow());
}

}  // namespace
}  // namespace mixprec::train
