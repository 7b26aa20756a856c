// checkpointing.h: the training state <-> a checkpoint (include/mixprec/checkpoint.h):
// model weights and buffers, optimizer state, f32 masters, scaler, RNG and position.
#pragma once
#include <string>

#include "mixprec/checkpoint.h"
#include "mixprec/train.h"
#include "train/precision_step.h"

namespace mixprec::train {

// Where the next step starts: epoch and batch within it, and the count of steps done.
struct Position {
  int64_t epoch = 0, batch_in_epoch = 0, global_step = 0;
};

TrainingState capture_state(PrecisionStep& step, const TrainConfig& config, const Position& pos);
// Everything must match the run being resumed (names, shapes, dtypes); errors name the
// checkpoint file and the tensor. Returns the position to continue from.
StatusOr<Position> restore_state(PrecisionStep& step, const TrainingState& state, const std::string& file);
// Copies weights saved by name (by PyTorch or another run) into the model, converting the
// dtype; every missing, unexpected or mis-shaped name is reported.
Status load_weights(nn::Module& model, const std::string& path);
// The same from tensors already read (a checkpoint's model tensors); `file` names them.
Status load_weights(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::string& file);

}  // namespace mixprec::train
