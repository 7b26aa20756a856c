// data_parallel_local_test.cpp: a rank's arithmetic in DataParallel (src/train/data_parallel.h)
// over the one-process communicator, where the other ranks' sums are the identity: the
// sample weight, the weighted reduction of f32 and 16-bit gradients (undefined ones left
// alone), the weighted loss, and agreement checks. Several ranks: tests/e2e/data_parallel_test.sh.
#include <gtest/gtest.h>

#include "mixprec/dist/distributed.h"
#include "mixprec/core/half.h"
#include "train/data_parallel.h"

namespace mixprec::train {
namespace {

TEST(DataParallelLocal, WeightIsTheRanksShareOfTheSamples) {
  auto comm = dist::make_local_communicator();
  DataParallel dp(*comm);
  auto w = dp.agree_on_step(1, 48);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_EQ(*w, 1.0);  // 48 x 1 rank / 48 in all
  EXPECT_FALSE(dp.agree_on_step(2, 0).is_ok());  // no samples anywhere
}

TEST(DataParallelLocal, GradientsAndLossAreWeightedThenAveraged) {
  auto comm = dist::make_local_communicator();
  DataParallel dp(*comm);
  // Parameters whose .grad backward filled (one left without a gradient).
  Tensor p32 = Tensor::zeros({3}), p16 = Tensor::zeros({2}, DType::bf16), unused = Tensor::zeros({4});
  p32.mutable_grad() = Tensor::from_vector({1.0f, -2.0f, 3.5f}, {3});
  p16.mutable_grad() = Tensor::from_vector({0.5f, 8.0f}, {2}).to(DType::bf16);
  ASSERT_TRUE(dp.reduce_gradients({p32, unused, p16}, 0.5, 1).is_ok());
  EXPECT_EQ(p32.grad().to_vector(), (std::vector<float>{0.5f, -1.0f, 1.75f}));
  EXPECT_EQ(p16.grad().to(DType::f32).to_vector(), (std::vector<float>{0.25f, 4.0f}));
  EXPECT_FALSE(unused.grad().defined());
  auto loss = dp.mean_loss(2.5, 0.5, 1);
  ASSERT_TRUE(loss.is_ok());
  EXPECT_EQ(*loss, 1.25);
}

TEST(DataParallelLocal, OneRankAlwaysAgreesWithItself) {
  auto comm = dist::make_local_communicator();
  DataParallel dp(*comm);
  EXPECT_TRUE(dp.check_same({{"training data", 42}}, "at the start").is_ok());
  EXPECT_TRUE(dp.check_same_text("training configuration", R"({"lr":0.1})", "at the start").is_ok());
  auto any = dp.any(true, "found-inf");
  ASSERT_TRUE(any.is_ok());
  EXPECT_TRUE(*any);
  // The hashes the ranks compare see every byte and shape.
  const Tensor a = Tensor::from_vector({1.0f, 2.0f}, {2}), b = Tensor::from_vector({1.0f, 2.5f}, {2});
  EXPECT_NE(hash_tensors({a}), hash_tensors({b}));
  EXPECT_NE(hash_tensors({a}), hash_tensors({Tensor::from_vector({1.0f, 2.0f}, {1, 2})}));
  EXPECT_EQ(hash_tensors({a}), hash_tensors({a.clone()}));
}

}  // namespace
}  // namespace mixprec::train
