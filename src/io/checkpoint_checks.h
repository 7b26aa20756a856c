// io/checkpoint_checks.h: the one load-and-check sequence of a checkpoint that is to be
// continued from (a last/best pointer, a resume, a rollback): load_checkpoint, then
// check_resumable, then find_nonfinite (checkpoint.h declares those two).
#pragma once
#include <string>

#include "mixprec/io/checkpoint.h"
#include "mixprec/core/status.h"

namespace mixprec {

// The checkpoint's state, or why it cannot be continued from: load_checkpoint's error as it
// is, bad_checkpoint naming every problem check_resumable found, or the first inf/NaN.
StatusOr<TrainingState> load_usable_checkpoint(const std::string& file);

}  // namespace mixprec
