// asha.cpp: the searchers' decision of what runs next (experiment.h next_decision):
// asynchronous successive halving, of which grid and random search are the one-rung case.
// A pure function of the trials recorded so far, so a resumed sweep decides exactly as the
// sweep it continues would have.
#include <algorithm>
#include <cmath>

#include "mixprec/experiment/experiment.h"

namespace mixprec::experiment {

bool better(double a, double b, bool smaller_is_better) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return smaller_is_better ? a < b : a > b;
}

Decision next_decision(const Searcher& s, bool smaller_is_better, const std::vector<TrialView>& trials,
                       int64_t trials_to_create) {
  const int top = int(s.rung_steps.size()) - 1;
  const int64_t eta = std::max<int64_t>(s.reduction_factor, 2);
  // Li et al., Algorithm 2 (get_job): look for a promotable trial from the highest rung down.
  for (int k = top - 1; k >= 0; --k) {
    std::vector<const TrialView*> done;  // completed rung k (and maybe more)
    for (const TrialView& t : trials)
      if (t.rungs_done > k) done.push_back(&t);
    // top_k(rung k, |rung k| / eta): the best floor(n / eta), ties to the lower id.
    std::sort(done.begin(), done.end(), [&](const TrialView* a, const TrialView* b) {
      const double ma = a->metrics[size_t(k)], mb = b->metrics[size_t(k)];
      if (better(ma, mb, smaller_is_better)) return true;
      if (better(mb, ma, smaller_is_better)) return false;
      return a->id < b->id;
    });
    const size_t promotable = done.size() / size_t(eta);
    for (size_t i = 0; i < promotable; ++i) {
      const TrialView& t = *done[i];
      // Not yet promoted: it completed rung k and no more, is not training now, and can go on.
      if (t.rungs_done == k + 1 && !t.running && !t.finished && !std::isnan(t.metrics[size_t(k)]))
        return {Decision::Kind::promote, t.id, k + 1};
    }
  }
  if (trials_to_create > 0) return {Decision::Kind::start, 0, 0};
  for (const TrialView& t : trials)
    if (t.running) return {Decision::Kind::wait, 0, 0};
  return {Decision::Kind::done, 0, 0};
}

int64_t best_trial(const ExperimentState& state, bool smaller_is_better) {
  const TrialRecord* best = nullptr;
  for (const TrialRecord& t : state.trials) {
    if (t.metrics.empty() || std::isnan(t.metrics.back())) continue;
    if (best == nullptr || better(t.metrics.back(), best->metrics.back(), smaller_is_better) ||
        (t.metrics.back() == best->metrics.back() && t.steps > best->steps))
      best = &t;
  }
  return best ? best->id : -1;
}

}  // namespace mixprec::experiment
