// divergence_guard.cpp: see divergence_guard.h.
#include "train/divergence_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace mixprec::train {

std::optional<std::string> DivergenceGuard::check(double loss, bool scaler_active) {
  if (!std::isfinite(loss)) {
    if (scaler_active) return std::nullopt;
    return std::string("loss is ") + (std::isnan(loss) ? "nan" : "inf");
  }
  if (spike_factor_ > 0 && int64_t(history_.size()) >= min_history_) {
    std::vector<double> sorted(history_.begin(), history_.end());
    std::nth_element(sorted.begin(), sorted.begin() + long(sorted.size() / 2), sorted.end());
    const double median = sorted[sorted.size() / 2];
    if (loss > spike_factor_ * median) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "loss spiked to %.4g, %.2fx the median %.4g of the last %zu steps (limit %gx)",
                    loss, loss / median, median, history_.size(), spike_factor_);
      return std::string(buf);
    }
  }
  history_.push_back(loss);
  if (int64_t(history_.size()) > window_) history_.pop_front();
  return std::nullopt;
}

void DivergenceGuard::rolled_back(int64_t epoch, int64_t batch) {
  ++rollbacks_;
  skipped_.insert({epoch, batch});
  history_.clear();
}

}  // namespace mixprec::train
