// divergence_guard_test.cpp: when a step counts as diverged (issue 13: the guard had no unit
// test). A non-finite loss diverges only without an active loss scaler; a finite loss
// diverges when it exceeds spike_factor x the median of the last `window` accepted losses,
// once `min_history` of them exist. Each threshold is tested on both sides.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "train/divergence_guard.h"

namespace mixprec::train {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void feed(DivergenceGuard& g, double loss, int times) {
  for (int i = 0; i < times; ++i) ASSERT_FALSE(g.check(loss, false).has_value()) << "loss " << loss;
}

TEST(DivergenceGuard, NonFiniteLossDivergesOnlyWithoutAScaler) {
  DivergenceGuard g(0.0);
  EXPECT_FALSE(g.check(kInf, /*scaler_active=*/true).has_value());  // the scaler skips the step
  EXPECT_FALSE(g.check(kNaN, true).has_value());
  EXPECT_EQ(g.check(kNaN, false).value_or(""), "loss is nan");
  EXPECT_EQ(g.check(-kInf, false).value_or(""), "loss is inf");
}

TEST(DivergenceGuard, SpikeThresholdIsStrictlyAboveFactorTimesMedian) {
  DivergenceGuard g(5.0, 50, 10);
  feed(g, 2.0, 10);
  EXPECT_FALSE(g.check(10.0, false).has_value());  // exactly 5 x 2: not above
  const auto spike = g.check(10.0001, false);
  ASSERT_TRUE(spike.has_value());
  EXPECT_NE(spike->find("median 2"), std::string::npos) << *spike;
  EXPECT_NE(spike->find("limit 5x"), std::string::npos) << *spike;
}

TEST(DivergenceGuard, NoSpikeDetectionBeforeMinHistory) {
  DivergenceGuard g(5.0, 50, 10);
  feed(g, 1.0, 9);
  EXPECT_FALSE(g.check(1000.0, false).has_value());  // 9 losses seen: too few to judge
  EXPECT_TRUE(g.check(1000.0, false).has_value());   // 10 seen (1000 joined): median 1
}

TEST(DivergenceGuard, TheMedianNotTheMeanIsTheReference) {
  // An early outlier raises the mean to ~101 but leaves the median at 1: 6 must diverge.
  DivergenceGuard g(5.0, 50, 10);
  feed(g, 1000.0, 1);
  feed(g, 1.0, 9);
  EXPECT_TRUE(g.check(6.0, false).has_value());
  EXPECT_FALSE(g.check(4.0, false).has_value());
}

TEST(DivergenceGuard, ASpikeDoesNotJoinTheHistoryAndTheWindowSlides) {
  DivergenceGuard g(5.0, /*window=*/20, 10);
  feed(g, 1.0, 20);
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(g.check(100.0, false).has_value());  // never accepted
  feed(g, 4.0, 20);  // the 1.0s slide out of the 20-loss window
  EXPECT_FALSE(g.check(19.9, false).has_value());  // median 4: 19.9 < 20
  EXPECT_TRUE(g.check(20.1, false).has_value());
}

TEST(DivergenceGuard, SpikeFactorZeroIsOff) {
  DivergenceGuard g(0.0, 50, 10);
  feed(g, 1.0, 20);
  EXPECT_FALSE(g.check(1e30, false).has_value());
}

TEST(DivergenceGuard, RollbackClearsHistoryCountsAndSkipsTheBatch) {
  DivergenceGuard g(5.0, 50, 10);
  feed(g, 1.0, 10);
  ASSERT_TRUE(g.check(100.0, false).has_value());
  EXPECT_FALSE(g.skips(2, 7));
  g.rolled_back(2, 7);
  EXPECT_EQ(g.rollbacks(), 1);
  EXPECT_TRUE(g.skips(2, 7));
  EXPECT_FALSE(g.skips(2, 8));
  EXPECT_FALSE(g.skips(3, 7));
  EXPECT_FALSE(g.check(100.0, false).has_value());  // history restarted: too few to judge
}

}  // namespace
}  // namespace mixprec::train
