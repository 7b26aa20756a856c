// checkpoint_gc.h: a trial's checkpoints garbage-collected by its metric (docs/experiments.md):
// the best `keep` by the evaluation logged at each checkpoint's step, plus the newest when the
// trial may still train on (ASHA may promote it) or is the experiment's best trial.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::experiment {

struct GcResult {
  std::vector<std::string> kept, removed;  // checkpoint file names
};

// Pointers are moved before anything is deleted (last.json to the newest kept checkpoint,
// best.json to the best kept one), so a kill at any moment leaves pointers that name files
// that exist. metric is "accuracy" or "loss" (the eval records' field).
StatusOr<GcResult> collect_checkpoints(const std::string& run_dir, const std::string& metric, bool smaller_is_better,
                                       int64_t keep, bool keep_newest);

}  // namespace mixprec::experiment
