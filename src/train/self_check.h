// self_check.h: before a 16-bit preset trains, run one batch in fp32 and in the preset
// from the same initial weights and compare the loss and the gradient direction (the
// Ultralytics check_amp idea). A preset that disagrees is not trusted.
#pragma once
#include <string>

#include "mixprec/data/data.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/train.h"

namespace mixprec::train {

struct SelfCheckResult {
  bool passed = true;
  double loss_fp32 = 0, loss_preset = 0;
  double grad_cosine = 1;  // cosine similarity of all gradients, preset vs fp32
  std::string summary;     // one line for logs
};

// Draws two models with manual_seed(config.seed) (the caller re-seeds afterwards).
SelfCheckResult amp_self_check(const amp::Preset& preset, const nn::ModelSpec& spec,
                               const TrainConfig& config, const Batch& batch);

}  // namespace mixprec::train
