// checkpointing.h: the training state <-> a checkpoint (include/mixprec/io/checkpoint.h):
// model weights and buffers, optimizer state, f32 masters, scaler, RNG and position.
#pragma once
#include <string>

#include "mixprec/io/checkpoint.h"
#include "mixprec/train/train.h"
#include "mixprec/train/weights.h"
#include "train/precision_step.h"

namespace mixprec::train {

// Where the next step starts: epoch and batch within it, and the count of steps done.
struct Position {
  int64_t epoch = 0, batch_in_epoch = 0, global_step = 0;
};


TrainingState capture_state(PrecisionStep& step, const TrainConfig& config, const Position& pos);
// Everything must match the run being resumed (names, shapes, dtypes) and pass
// check_resumable (scaler, counters, rng_state: every problem, one line each); errors name the
// checkpoint file and the tensor or field. Returns the position to continue from.
StatusOr<Position> restore_state(PrecisionStep& step, const TrainingState& state, const std::string& file);
// What save_checked did with a state.
struct SavedCheckpoint {
  std::string file;      // the file written ("" when nothing was)
  bool usable = false;   // a checkpoint last.json (and best.json) now point at
  std::string problem;   // when not usable: why, naming the first offending tensor or field
};
// Saves a state into run_dir, but only a state a resume or rollback may continue from becomes
// a checkpoint: finite (find_nonfinite) and resumable (check_resumable) -> checkpoint_filename,
// then last.json (and, with is_best, best.json) point at it. A state holding inf/NaN is
// written as nonfinite_checkpoint_filename(step) for `mixprec inspect`, and no pointer moves;
// one failing check_resumable (e.g. a loss scale that underflowed to 0) is not written at all.
StatusOr<SavedCheckpoint> save_checked(const std::string& run_dir, const TrainingState& state, bool is_best);

}  // namespace mixprec::train
