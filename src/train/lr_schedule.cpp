// lr_schedule.cpp: the learning rate of an optimizer step (train.h, lr_at). The training loop
// asks it with the count of *applied* steps: a step the GradScaler skipped does not advance
// the schedule (PyTorch users meet this as the warning "Detected call of
// lr_scheduler.step() before optimizer.step()" when the first steps overflow).
#include <algorithm>
#include <cmath>

#include "mixprec/train/train.h"

namespace mixprec::train {

double lr_at(const TrainConfig& c, int64_t step, int64_t total_steps) {
  if (c.warmup_steps > 0 && step <= c.warmup_steps) return c.lr * double(step) / double(c.warmup_steps);
  if (c.lr_schedule == "constant") return c.lr;
  const int64_t span = total_steps - c.warmup_steps - 1;
  const double p = span <= 0 ? 1.0 : std::clamp(double(step - c.warmup_steps - 1) / double(span), 0.0, 1.0);
  if (c.lr_schedule == "cosine") return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * p));
  return c.lr - (c.lr - c.min_lr) * p;  // linear
}

}  // namespace mixprec::train
