// phased_step.cpp: the timed training step of bench_step (see phased_step.h).
#include "bench/phased_step.h"

#include <chrono>
#include <optional>
#include <vector>

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/ops/ops.h"
#include "mixprec/train/step_benchmark.h"
#include "mixprec/train/train.h"

namespace mixprec::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

PhasedStep::PhasedStep(const nn::ModelSpec& spec, const amp::Preset& preset, int64_t batch, uint64_t seed) {
  step_ = std::make_unique<train::BenchmarkStep>(spec, preset, batch, seed);
  batch_ = train::synthetic_batch(spec, batch, seed);
}

PhaseTimes PhasedStep::run() {
  amp::reset_cast_cache_stats();
  const auto t0 = Clock::now();
  const train::BenchmarkStep::Phases out = step_->run(batch_);
  last_casts_ = amp::cast_cache_stats().casts;
  PhaseTimes t;
  t.whole = ms_between(t0, Clock::now());
  t.forward = out.forward_ms;
  t.backward = out.backward_ms;
  t.optimizer = out.update_ms;
  last_loss_ = out.loss;
  return t;
}

double PhasedStep::weight_cast_ms() {
  const amp::Preset& preset = step_->preset();
  // Only the casts the last step really made: with prepared copies (amp::offer_cast) a
  // steady step makes none, and their cost (the 16-bit writes) is in the update phase.
  if (!preset.autocast_dtype || last_casts_ == 0) return 0.0;
  const std::vector<Tensor> params = step_->model().parameters();
  NoGradGuard ng;
  const auto t0 = Clock::now();
  for (const Tensor& p : params) {
    Tensor c = p.to(*preset.autocast_dtype);
    (void)c;
  }
  return ms_between(t0, Clock::now());
}

double step_flops(const std::string& model, int64_t batch) {
  const double b = double(batch);
  if (model == "mlp") {
    const double l1 = 784.0 * 4096, l2 = 4096.0 * 4096, l3 = 4096.0 * 10;
    return 2.0 * b * (3.0 * (l1 + l2 + l3) - l1);
  }
  if (model == "transformer") {
    // TransformerClassifier on the spec's geometry: T = B*S tokens of W features, d_model E,
    // ffn F (models.h). Multiply-accumulates of the forward: input_proj (only when W != E)
    // T*W*E; in_proj T*3E*E; attention Q K^T and P V, B*S*S*E each (summed over heads);
    // out_proj T*E*E; linear1 + linear2 2*T*E*F; fc B*E*classes. Backward doubles each
    // (both operands' gradients); the first layer's input needs no gradient.
    const nn::ModelSpec spec = nn::model_spec(model).value();
    const double E = 256, F = 1024, S = double(spec.height), W = double(spec.width);
    const double T = b * S;
    const double first = W != E ? T * W * E : T * 3 * E * E;
    const double rest = (W != E ? T * 3 * E * E : 0.0) + 2 * b * S * S * E + T * E * E +
                        2 * T * E * F + b * E * double(spec.classes);
    return 2.0 * (3.0 * (first + rest) - first);
  }
  // Cnn(C, H, W): conv1 C->32 and conv2 32->64 (3x3, same padding, pool 2 after each),
  // fc1 64*(H/4)*(W/4) -> 256, fc2 256 -> 10. Multiply-accumulates per image:
  double c = 3, h = 32, w = 32;  // seed-cnn
  if (model == "cnn") c = 1, h = 28, w = 28;
  const double conv1 = h * w * 32 * c * 9;
  const double conv2 = (h / 2) * (w / 2) * 64 * 32 * 9;
  const double fc1 = 64 * (h / 4) * (w / 4) * 256;
  const double fc2 = 256.0 * 10;
  return 2.0 * b * (3.0 * (conv1 + conv2 + fc1 + fc2) - conv1);
}

}  // namespace mixprec::bench
