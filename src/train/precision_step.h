// precision_step.h: one optimizer step of training under a precision preset: autocast
// around forward + loss, the GradScaler around backward and step, f32 master weights for
// O2, gradient accumulation over micro-batches, clipping and fault injection.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/data.h"
#include "mixprec/grad_scaler.h"
#include "mixprec/nn.h"
#include "mixprec/optim.h"
#include "mixprec/precision.h"
#include "mixprec/train.h"

namespace mixprec::train {

class PrecisionStep {
 public:
  // Converts the model's weights to the preset's param_dtype and builds the optimizer (over
  // f32 masters for O2) and the scaler.
  PrecisionStep(const amp::Preset& preset, std::shared_ptr<nn::Module> model, const TrainConfig& config);

  struct Outcome {
    double loss = 0.0;        // mean over the micro-batches, unscaled
    bool finite = true;       // the loss itself was finite
    bool stepped = true;      // the update was applied (false: the scaler skipped it)
    double scale_used = 1.0;  // loss scale of this step
  };
  // One optimizer step over the micro-batches (their losses are averaged). When
  // inject_into is set, that parameter's gradient gets an inf before the step.
  Outcome run(const std::vector<Batch>& micro_batches, const std::string* inject_into = nullptr);
  // Forward of a batch under the preset, without grad (evaluation).
  Tensor predict(const Tensor& images);

  nn::Module& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  amp::GradScaler& scaler() { return scaler_; }
  amp::MasterWeights* masters() { return masters_ ? &*masters_ : nullptr; }
  const amp::Preset& preset() const { return preset_; }

 private:
  amp::Preset preset_;
  std::shared_ptr<nn::Module> model_;
  std::optional<amp::MasterWeights> masters_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  amp::GradScaler scaler_;
  double clip_grad_norm_;
};

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params);
amp::GradScalerOptions scaler_options(const amp::Preset& preset, const TrainConfig& c);

}  // namespace mixprec::train
