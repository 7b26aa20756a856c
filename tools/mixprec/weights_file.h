// weights_file.h: what `inspect`, `eval`, `infer` and `predict` open: a mixprec checkpoint (or a run
// directory), or a plain safetensors file of weights as PyTorch writes it
// (safetensors.torch.save_file(model.state_dict(), path): tensors only, no mixprec metadata).
// For the plain file the model is found by its tensor names and shapes.
#pragma once
#include <memory>
#include <string>

#include "mixprec/checkpoint.h"
#include "mixprec/models.h"
#include "mixprec/precision.h"
#include "mixprec/status.h"
#include "mixprec/train.h"

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

// A checkpoint opened as a model ready to run (what `eval` and `predict` share).
struct LoadedModel {
  OpenedWeights opened;
  // The run's configuration; for a plain weights file the defaults, with the model's usual
  // dataset (its normalisation and class names).
  train::TrainConfig config;
  nn::ModelSpec spec;
  amp::Preset preset;                 // --precision, else the checkpoint's, else fp32
  std::shared_ptr<nn::Module> model;  // eval mode, weights in the preset's parameter dtype
};

// Errors: bad_checkpoint naming the file and the metadata key (unreadable file, unknown
// model, a plain file that matches no model, an unknown precision in the file, weights that
// do not fit); invalid_argument naming --precision when the flag's value is unknown.
StatusOr<LoadedModel> load_model(const std::string& path_or_run_dir, const std::string& precision_flag);

// Prints load_model's error ("mixprec: checkpoint error: ..." or "usage error") and returns
// its exit code (4 or 2).
int report_load_error(const Status& status);

// The model's logits for input (f32, NCHW, normalised) under its preset: inputs cast to the
// parameter dtype, autocast as the preset says; returned in f32. No autograd.
Tensor run_model(const LoadedModel& loaded, const Tensor& input);

}  // namespace mixprec::cli
