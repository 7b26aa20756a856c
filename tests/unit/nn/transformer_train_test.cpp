// transformer_train_test.cpp: `mixprec train --model transformer --dataset synthetic
// --precision amp-bf16` through the library's training loop (train::run), cut to 3 steps:
// the dataset geometry check against the model spec, the AMP self-check, training steps
// and evaluation all accept the transformer. Most of the time goes to drawing the synthetic
// dataset (7000 images of 128x256), hence its own binary.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/train/train.h"

namespace mixprec {
namespace {

// What `mixprec train --model transformer --dataset synthetic --precision amp-bf16` runs,
// cut to 3 steps on a small subset.
TEST(TransformerModelTraining, TrainsThroughTheTrainingLoopOnSynthetic) {
  train::TrainConfig c;
  c.model = "transformer";
  c.dataset = "synthetic";
  c.precision = "amp-bf16";
  c.batch_size = 4;
  c.max_steps = 3;
  c.epochs = 1;
  c.train_subset = 12;
  c.test_subset = 8;
  ASSERT_TRUE(train::validate(c).is_ok()) << train::validate(c).message();
  auto result = train::run(c);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  EXPECT_EQ(result->steps, 3);
  ASSERT_EQ(result->losses.size(), 3u);
  for (double l : result->losses) EXPECT_TRUE(std::isfinite(l));
  ASSERT_FALSE(result->evals.empty());
  EXPECT_EQ(result->evals.back().samples, 8);
  EXPECT_EQ(result->precision, "amp-bf16");  // the self-check did not fall back to fp32
}

}  // namespace
}  // namespace mixprec
