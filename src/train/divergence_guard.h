// divergence_guard.h: decides when a training step has diverged — a non-finite loss that no
// loss scaler can absorb, or a loss spike far above the recent losses — and keeps the
// rollback budget and the batches a rollback skips (PaLM's recipe: restart from the last
// good checkpoint and step over the data that triggered the spike).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace mixprec::train {

class DivergenceGuard {
 public:
  // spike_factor > 0: a finite loss above spike_factor x the median of the last `window`
  // step losses diverges (a median: one early outlier must not blind the guard), once at
  // least `min_history` losses have been seen.
  explicit DivergenceGuard(double spike_factor, int64_t window = 50, int64_t min_history = 10)
      : spike_factor_(spike_factor), window_(window), min_history_(min_history) {}

  // Why this step's loss counts as divergence, or nothing. Finite losses that pass join
  // the history. A non-finite loss diverges only when no scaler is active (with a scaler
  // the step is skipped and the scale backs off instead).
  std::optional<std::string> check(double loss, bool scaler_active);

  // After a rollback: the history restarts (the losses after the checkpoint are gone), and
  // batch `batch` of epoch `epoch` is stepped over from now on.
  void rolled_back(int64_t epoch, int64_t batch);
  bool skips(int64_t epoch, int64_t batch) const { return skipped_.count({epoch, batch}) > 0; }
  int64_t rollbacks() const { return rollbacks_; }

 private:
  double spike_factor_;
  int64_t window_, min_history_;
  std::deque<double> history_;
  int64_t rollbacks_ = 0;
  std::set<std::pair<int64_t, int64_t>> skipped_;
};

}  // namespace mixprec::train
