// precision_step.h: one optimizer step of training under a precision preset: autocast
// around forward + loss, the GradScaler around backward and step, f32 master weights for
// O2, gradient accumulation over micro-batches, clipping and fault injection.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mixprec/data/data.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/nn/nn.h"
#include "mixprec/optim/optim.h"
#include "mixprec/amp/precision.h"
#include "mixprec/io/run_dir.h"
#include "mixprec/train/train.h"
#include "train/data_parallel.h"

namespace mixprec::train {

// The model's input in its parameters' dtype; integer inputs (a language model's tokens)
// are indices and stay as they are.
Tensor model_input(const Tensor& x, DType param_dtype);
// Cross-entropy of logits [..., C] against class indices [...]: one classification per
// image, or per position of a sequence (a language model's next byte).
Tensor classification_loss(const Tensor& logits, const Tensor& labels, Reduction r = Reduction::mean);

class PrecisionStep {
 public:
  // Converts the model's weights to the preset's param_dtype and builds the optimizer (over
  // f32 masters for O2) and the scaler.
  PrecisionStep(const amp::Preset& preset, std::shared_ptr<nn::Module> model, const TrainConfig& config);
  ~PrecisionStep();  // withdraws its offered 16-bit copies (amp::offer_cast)
  PrecisionStep(const PrecisionStep&) = delete;
  PrecisionStep& operator=(const PrecisionStep&) = delete;

  struct Outcome {
    double loss = 0.0;        // mean over the micro-batches, unscaled
    bool finite = true;       // the loss itself was finite
    bool stepped = true;      // the update was applied (false: the scaler skipped it)
    double scale_used = 1.0;  // loss scale of this step
    // Wall time of the step's phases (benchmarks read them; summed over micro-batches):
    // forward = input cast + autocast forward + loss + loss.item(); backward =
    // scaler.scale(loss).backward() (+ f32 master-gradient accumulation); update = zero_grad,
    // unscale/clip, the optimizer step with the scaler's check, update() and weight copies.
    double forward_ms = 0.0, backward_ms = 0.0, update_ms = 0.0;
    // After count_underflow_next_step(): the gradients the update reads, counted against
    // f16's range before the scaler unscales them (after the ranks' average, in an mpirun job).
    std::optional<GradientUnderflow> underflow;
  };
  // One optimizer step over the micro-batches (their losses are averaged). When
  // inject_into is set, that parameter's gradient gets an inf before the step.
  Outcome run(const std::vector<Batch>& micro_batches, const std::string* inject_into = nullptr);

  // The fused update (on by default): after backward, a read-only inf/NaN check, then one
  // optimizer pass per parameter that unscales the gradient as it reads it and, under O2,
  // reads the 16-bit model gradient directly and writes the rounded 16-bit weight (no
  // unscale, master-gradient or copy-to-model passes). Weights, masters, optimizer and
  // scaler state come out bit-identical to the unfused step. What differs is what is left
  // in .grad afterwards: under O2 with one micro-batch and no clipping the masters get no
  // .grad (the gradients stay on the model's weights), and scaled gradients stay scaled.
  // Callers that read .grad after run() (the AMP self-check) switch it off. Gradient
  // accumulation (several micro-batches) and clipping still fill the masters' f32 .grad
  // first and fuse only the unscale and the weight copy; 16-bit parameters with a scaler
  // (no preset has them) always take the unfused path.
  void set_fused_update(bool on) { fused_update_ = on; }
  // Gradient-underflow telemetry (--underflow-every): the next run() fills Outcome::underflow.
  // Meaningful only where gradients pass through f16 (counts_underflow(): an f16 compute or
  // parameter dtype); bf16 has f32's exponent range, so against it nothing would underflow
  // that f32 keeps, and against f16's range the counts would describe a dtype the run never uses.
  void count_underflow_next_step() { underflow_due_ = true; }
  bool counts_underflow() const {
    return preset_.compute_dtype == DType::f16 || preset_.param_dtype == DType::f16;
  }
  bool fused_update() const { return fused_update_; }
  // Forward of a batch under the preset, without grad (evaluation).
  Tensor predict(const Tensor& images);
  // Data-parallel training: run() averages the gradients (and the loss) over the ranks of
  // `dp`, this rank's weighted by `weight` (DataParallel::agree_on_step), before clipping,
  // the inf/NaN check and the update; the reduction of each bucket starts during backward as
  // soon as its gradients are final (DataParallel::overlaps_backward). O2 reduces the f32
  // masters' gradients (never 16-bit ones). Null: one process.
  void set_data_parallel(DataParallel* dp) { dp_ = dp; }
  // --sync-bn: installed around every forward and backward of run().
  void set_batch_norm_sync(std::shared_ptr<const BatchNormSync> sync) { bn_sync_ = std::move(sync); }
  void set_step_weight(double weight, int64_t step) {
    dp_weight_ = weight;
    dp_step_ = step;
  }

  nn::Module& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  amp::GradScaler& scaler() { return scaler_; }
  amp::MasterWeights* masters() { return masters_ ? &*masters_ : nullptr; }
  const amp::Preset& preset() const { return preset_; }

 private:
  // What a step does, decided once from the preset, the options and the micro-batch count
  // (plan()); each part of run() below reads these instead of deciding again.
  struct Plan {
    bool fuse = false;        // the fused update (set_fused_update), unless the preset rules it out
    bool accumulate = false;  // O2: the masters' f32 .grad filled after each backward
    bool overlap = false;     // data-parallel buckets reduced during the last backward
  };
  Plan plan(size_t micro_batches, bool injecting) const;
  // The parts of run(), in order: zero the gradients and start the ranks' reduction; per
  // micro-batch the autocast forward and loss (returns its value), then the scaled backward;
  // the injected inf; the reduction over the ranks; clipping, the (fused) optimizer step
  // under the scaler and the weight copies (returns whether the update was applied).
  void begin_gradients(const Plan& plan);
  double forward(const Batch& b, Tensor& loss);
  void backward(const Tensor& loss, bool last, const Plan& plan);
  void inject_inf(const std::string& name, const Plan& plan);
  void reduce_over_ranks(Outcome& out);
  bool update(const Plan& plan);
  GradientUnderflow count_underflow(const Plan& plan);

  amp::Preset preset_;
  std::shared_ptr<nn::Module> model_;
  std::optional<amp::MasterWeights> masters_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  amp::GradScaler scaler_;
  double clip_grad_norm_;
  bool fused_update_ = true;
  bool underflow_due_ = false;
  // The fused step's per-parameter inputs, sized once so that a step allocates nothing.
  std::vector<Tensor> fused_grads_, fused_out_;
  // Autocast presets without masters: each f32 parameter's 16-bit copy, written by the
  // fused update as it writes the parameter and offered to the next forward's weight-cast
  // cache (amp::offer_cast), instead of that forward re-reading every parameter to cast it.
  std::vector<Tensor> prepared_;
  DataParallel* dp_ = nullptr;
  std::shared_ptr<const BatchNormSync> bn_sync_;
  std::unordered_map<const TensorImpl*, size_t> leaf_index_;  // model weight -> optimizer index
  double dp_weight_ = 1.0;
  int64_t dp_step_ = 0;
};

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params);
amp::GradScalerOptions scaler_options(const amp::Preset& preset, const TrainConfig& c);

}  // namespace mixprec::train
