// lr_schedule_test.cpp: train::lr_at against the formulas written out here: linear warm-up
// from lr / N, then constant, cosine or linear decay reaching min_lr exactly at the last
// planned step; and a run's optimizer steps with the scheduled rate (read back from the
// losses' metrics is the e2e test's job: resume_test).
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/train.h"
#include "mixprec/train_config.h"

namespace mixprec::train {
namespace {

TEST(LrSchedule, WarmupThenCosineOrLinearToMinLrAtTheLastStep) {
  TrainConfig c;
  c.lr = 0.1;
  c.min_lr = 0.01;
  c.warmup_steps = 4;
  const int64_t total = 14;  // steps 5..14 decay: p = (step - 5) / 9
  for (const char* schedule : {"constant", "cosine", "linear"}) {
    SCOPED_TRACE(schedule);
    c.lr_schedule = schedule;
    for (int64_t s = 1; s <= 4; ++s) EXPECT_DOUBLE_EQ(lr_at(c, s, total), 0.1 * double(s) / 4.0);
    for (int64_t s = 5; s <= total; ++s) {
      const double p = double(s - 5) / 9.0;
      const double want = c.lr_schedule == "constant" ? 0.1
                          : c.lr_schedule == "cosine" ? 0.01 + 0.09 * 0.5 * (1 + std::cos(M_PI * p))
                                                      : 0.1 - 0.09 * p;
      EXPECT_NEAR(lr_at(c, s, total), want, 1e-15) << "step " << s;
    }
  }
  c.lr_schedule = "cosine";
  EXPECT_DOUBLE_EQ(lr_at(c, 5, total), 0.1);    // the first step after warm-up: the full rate
  EXPECT_DOUBLE_EQ(lr_at(c, 14, total), 0.01);  // the last: min_lr
  EXPECT_DOUBLE_EQ(lr_at(c, 99, total), 0.01);  // past the plan: stays at min_lr
  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(lr_at(c, 1, 1), 0.01);  // a one-step run ends where the schedule ends
}

TEST(LrSchedule, BadSettingsAreRefusedNamingTheFlag) {
  TrainConfig c;
  c.lr_schedule = "cosin";
  EXPECT_NE(validate(c).message().find("--lr-schedule: expected one of: constant, cosine, linear; got 'cosin' "
                                       "(did you mean 'cosine'?)"),
            std::string::npos)
      << validate(c).message();
  c = TrainConfig{};
  c.min_lr = 0.5;
  EXPECT_NE(validate(c).message().find("--min-lr: must not exceed --lr"), std::string::npos) << validate(c).message();
  c = TrainConfig{};
  c.warmup_steps = -1;
  EXPECT_NE(validate(c).message().find("--warmup-steps"), std::string::npos);
}

}  // namespace
}  // namespace mixprec::train
