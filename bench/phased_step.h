// phased_step.h: one training step under a precision preset, timed per phase, for
// bench_step: the library's own step (train::BenchmarkStep, what `mixprec train` runs: weights in the
// preset's dtype, f32 masters, Adam, scaler, the fused optimizer step), which reports the
// wall time of its phases.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/step_benchmark.h"
#include "mixprec/core/tensor.h"

namespace mixprec::bench {

// Milliseconds of one step, by phase.
struct PhaseTimes {
  double forward = 0;    // input cast + autocast forward + cross_entropy + loss.item()
  double backward = 0;   // scaler.scale(loss).backward()
  double optimizer = 0;  // zero_grad, the scaler's inf check, the (fused) update, weight copies
  double whole = 0;      // wall time of the whole step (>= the sum of the phases)
};

class PhasedStep {
 public:
  // Builds the model (seeded, so every preset starts from the same f32 weights), a random
  // batch of `batch` images and labels, and the preset's optimizer/scaler/masters.
  PhasedStep(const nn::ModelSpec& spec, const amp::Preset& preset, int64_t batch, uint64_t seed = 0);

  PhaseTimes run();
  double last_loss() const { return last_loss_; }
  const amp::Preset& preset() const { return step_->preset(); }
  int64_t num_parameters() { return step_->model().num_parameters(); }

  // Time (ms) to cast every parameter to the autocast dtype once: what the weight-cast
  // cache costs per step when it casts (each parameter once per outermost autocast
  // region). 0 when the last step cast none: PrecisionStep's fused update writes the 16-bit
  // copies (amp::offer_cast) and that cost is in the update phase. Timed apart from the
  // step; bench_step samples it after every timed step.
  double weight_cast_ms();  // 0 when the last step cast no weight (prepared copies)

 private:
  std::unique_ptr<train::BenchmarkStep> step_;
  Batch batch_;  // a fixed random batch: data loading is not part of the step
  double last_loss_ = 0;
  int64_t last_casts_ = 0;  // weight casts the last step's forward made
};

// FLOPs of one training step (conv, linear and the attention's two batched products;
// forward + bwd_data + bwd_weights, minus the first layer's bwd_data), the counting of
// reference/limits.md §5 (transformer: 19.33 GFLOP at batch 32).
double step_flops(const std::string& model, int64_t batch);

}  // namespace mixprec::bench
