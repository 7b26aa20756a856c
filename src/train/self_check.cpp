// self_check.cpp: the AMP self-check (see self_check.h).
#include "train/self_check.h"

#include <cmath>
#include <cstdio>

#include "train/precision_step.h"

namespace mixprec::train {

namespace {

// Gradients of every parameter after one forward/backward, as f64, in parameter order.
std::vector<double> gradients_after_one_batch(const amp::Preset& preset, const nn::ModelSpec& spec,
                                              const TrainConfig& config, const Batch& batch,
                                              double& loss_out) {
  manual_seed(config.seed);
  TrainConfig c = config;
  c.clip_grad_norm = 0;
  PrecisionStep step(preset, nn::make_model(spec), c);
  step.set_fused_update(false);  // the comparison reads every parameter's unscaled f32 .grad
  step.optimizer().set_lr(0.0);  // measure, do not learn
  const PrecisionStep::Outcome out = step.run({batch});
  loss_out = out.loss;
  std::vector<double> g;
  if (!out.stepped) return g;  // the scaler found an overflow: nothing comparable
  // The masters hold the (f32) gradients under O2; otherwise the model's parameters.
  const auto& params = step.optimizer().params();
  for (const auto& p : params) {
    // step.run cleared nothing after stepping: .grad holds this batch's unscaled gradient
    // (the scaler unscaled it in place before stepping).
    if (!p.grad().defined()) continue;
    for (double v : p.grad().to_vector_f64()) g.push_back(v);
  }
  return g;
}

}  // namespace

SelfCheckResult amp_self_check(const amp::Preset& preset, const nn::ModelSpec& spec,
                               const TrainConfig& config, const Batch& batch) {
  SelfCheckResult r;
  const amp::Preset fp32 = amp::preset_by_name("fp32").value();
  const std::vector<double> a = gradients_after_one_batch(fp32, spec, config, batch, r.loss_fp32);
  const std::vector<double> b = gradients_after_one_batch(preset, spec, config, batch, r.loss_preset);
  double dot = 0, na = 0, nb = 0;
  if (a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) {
      dot += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
  }
  r.grad_cosine = (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : 0.0;
  const double rel = std::fabs(r.loss_preset - r.loss_fp32) / std::max(std::fabs(r.loss_fp32), 1e-12);
  // Thresholds: 16-bit rounding moves the loss by well under 1% and keeps the gradient
  // direction (cosine ~0.999+); a broken path gives NaN, a wrong loss or a random direction.
  // A skipped first step (scaler overflow) has no gradient to compare, and is fine.
  r.passed = std::isfinite(r.loss_preset) && rel < 0.05 && (r.grad_cosine > 0.95 || nb == 0);
  char line[200];
  std::snprintf(line, sizeof line, "AMP self-check %s: loss fp32 %.5f vs %s %.5f, gradient cosine %.4f",
                r.passed ? "passed" : "FAILED", r.loss_fp32, preset.name.c_str(), r.loss_preset,
                r.grad_cosine);
  r.summary = line;
  return r;
}

}  // namespace mixprec::train
