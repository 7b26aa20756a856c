// lr_schedule_test.cpp: train::lr_at against the formulas written out here: linear warm-up
// from lr / N, then constant, cosine or linear decay reaching min_lr exactly at the last
// planned step; a step the GradScaler skips does not advance it (a run with an injected
// overflow); resuming it exactly is the e2e test's job (resume_test).
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/train/train.h"
#include "mixprec/train/train_config.h"

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

// A step the GradScaler skips does not advance the schedule: with an inf injected into step
// 3's gradients under amp-fp16 (dynamic loss scaling), step 3 runs at the schedule's third
// rate and is skipped, and step 4 runs at that same third rate again.
TEST(LrSchedule, ASkippedStepDoesNotAdvanceTheSchedule) {
  TrainConfig c;
  c.model = "mlp";
  c.dataset = "synthetic";
  c.precision = "amp-fp16";
  c.batch_size = 8;
  c.max_steps = 6;
  c.lr = 0.01;
  c.lr_schedule = "linear";
  c.min_lr = 0.001;
  c.warmup_steps = 2;
  c.evaluate = false;
  c.self_check = false;
  c.threads = 2;
  c.inject_nonfinite_step = 3;
  std::vector<StepReport> steps;
  Callbacks cb;
  cb.on_step = [&](const StepReport& r) { steps.push_back(r); };
  auto result = run(c, cb);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  ASSERT_EQ(steps.size(), 6u);
  const int64_t total = steps[0].total_steps;
  // Applied steps before each step: 0, 1, 2, 2 (step 3 skipped), 3, 4.
  const int64_t position[] = {1, 2, 3, 3, 4, 5};
  for (size_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    EXPECT_EQ(steps[i].skipped, i == 2);
    EXPECT_DOUBLE_EQ(steps[i].lr, lr_at(c, position[i], total));
  }
  EXPECT_NE(lr_at(c, 3, total), lr_at(c, 4, total));  // so the check above can tell the two apart
}

}  // namespace
}  // namespace mixprec::train
