// phased_step.cpp: the timed training step of bench_step (see phased_step.h).
#include "bench/phased_step.h"

#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include "mixprec/amp.h"
#include "mixprec/autograd.h"
#include "mixprec/grad_scaler.h"
#include "mixprec/ops.h"
#include "mixprec/train.h"

namespace mixprec::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

PhasedStep::PhasedStep(const nn::ModelSpec& spec, const amp::Preset& preset, int64_t batch, uint64_t seed) {
  train::TrainConfig config;  // Adam, lr 1e-3, PyTorch's scaler defaults: what `mixprec train` runs
  config.model = spec.name;
  config.precision = preset.name;
  config.batch_size = batch;
  manual_seed(seed);
  step_ = std::make_unique<train::PrecisionStep>(preset, nn::make_model(spec), config);
  // A fixed random batch: data loading is not part of the step being measured.
  images_ = Tensor::normal({batch, spec.channels, spec.height, spec.width}, 0.0, 1.0);
  std::mt19937_64 rng(seed + 1);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (auto& l : labels) l = int64_t(rng() % uint64_t(spec.classes));
  labels_ = Tensor::from_vector_i64(labels, {batch});
}

PhaseTimes PhasedStep::run() {
  PhaseTimes t;
  nn::Module& model = step_->model();
  optim::Optimizer& opt = step_->optimizer();
  amp::GradScaler& scaler = step_->scaler();
  amp::MasterWeights* masters = step_->masters();
  const amp::Preset& preset = step_->preset();

  const auto t0 = Clock::now();
  opt.zero_grad();
  if (masters) masters->zero_grad();
  model.zero_grad();
  const auto t1 = Clock::now();

  Tensor loss;
  {
    std::optional<amp::AutocastGuard> autocast;
    if (preset.autocast_dtype) autocast.emplace(*preset.autocast_dtype);
    loss = cross_entropy(model(images_.to(preset.param_dtype)), labels_);
  }
  last_loss_ = loss.item();
  const auto t2 = Clock::now();

  scaler.scale(loss).backward();
  const auto t3 = Clock::now();

  if (masters) masters->accumulate_grads();
  // Explicit unscale (as with clipping) so that its cost is counted as AMP machinery;
  // step() then does not unscale again.
  if (scaler.is_enabled()) scaler.unscale(opt);
  const auto t4 = Clock::now();
  const bool stepped = scaler.step(opt);
  const auto t5 = Clock::now();
  scaler.update();
  if (masters && stepped) masters->copy_to_model();
  const auto t6 = Clock::now();

  t.forward = ms_between(t1, t2);
  t.backward = ms_between(t2, t3);
  t.optimizer = ms_between(t0, t1) + ms_between(t3, t6);
  t.amp = ms_between(t3, t4) + ms_between(t5, t6);
  t.whole = ms_between(t0, t6);
  return t;
}

double PhasedStep::weight_cast_ms() {
  const amp::Preset& preset = step_->preset();
  if (!preset.autocast_dtype) return 0.0;
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
