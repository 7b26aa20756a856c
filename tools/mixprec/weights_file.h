// weights_file.h: what `inspect`, `eval` and `infer` open: a mixprec checkpoint (or a run
// directory), or a plain safetensors file of weights as PyTorch writes it
// (safetensors.torch.save_file(model.state_dict(), path): tensors only, no mixprec metadata).
// For the plain file the model is found by its tensor names and shapes.
#pragma once
#include <string>

#include "mixprec/checkpoint.h"
#include "mixprec/status.h"

namespace mixprec::cli {

struct OpenedWeights {
  std::string path;      // the file read (a run directory resolves to its last checkpoint)
  TrainingState state;   // for a plain file: model tensors and model_name only
  bool weights_only = false;
  // Plain file: "matches model cnn (8 tensors)" or why it matches none ("closest is cnn:
  // missing 'fc2.bias'; 'fc1.weight' has shape [128, 3136], cnn has [256, 3136]").
  std::string model_note;
};

// Errors: the checkpoint's own (not_found, data_loss ...) when the file is neither a mixprec
// checkpoint nor a plain safetensors file.
StatusOr<OpenedWeights> open_weights(const std::string& path_or_run_dir);

}  // namespace mixprec::cli
