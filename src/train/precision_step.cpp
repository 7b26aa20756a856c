// precision_step.cpp: the training step under a preset (see precision_step.h).
#include "train/precision_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/convert.h"
#include "core/storage.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "train/gradient_underflow.h"

namespace mixprec::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Tensor> params) {
  if (c.optimizer == "sgd")
    return std::make_unique<optim::SGD>(
        std::move(params), optim::SGDOptions{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.weight_decay});
  optim::AdamOptions o;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  if (c.optimizer == "adamw") return std::make_unique<optim::AdamW>(std::move(params), o);
  return std::make_unique<optim::Adam>(std::move(params), o);
}

amp::GradScalerOptions scaler_options(const amp::Preset& preset, const TrainConfig& c) {
  amp::GradScalerOptions so;
  so.enabled = preset.loss_scaling;
  so.init_scale = c.init_scale;
  so.growth_factor = c.growth_factor;
  so.backoff_factor = c.backoff_factor;
  so.growth_interval = c.growth_interval;
  so.hysteresis = c.hysteresis;
  if (c.min_scale > 0) so.min_scale = c.min_scale;
  return so;
}

PrecisionStep::PrecisionStep(const amp::Preset& preset, std::shared_ptr<nn::Module> model,
                             const TrainConfig& config)
    : preset_(preset), model_(std::move(model)), scaler_(scaler_options(preset, config)),
      clip_grad_norm_(config.clip_grad_norm) {
  if (preset_.param_dtype != DType::f32) model_->to(preset_.param_dtype, preset_.keep_norm_fp32);
  if (preset_.master_weights) masters_.emplace(model_->named_parameters());
  optimizer_ = make_optimizer(config, masters_ ? masters_->masters() : model_->parameters());
  scaler_.name_parameters(masters_ ? masters_->named_masters() : model_->named_parameters());
  fused_grads_.resize(optimizer_->params().size());
  fused_out_.resize(optimizer_->params().size());
  if (preset_.autocast_dtype && !masters_) {
    MemoryCategoryGuard mg(MemoryCategory::parameters);  // weight copies, as the cache's are
    for (const Tensor& p : optimizer_->params())
      prepared_.push_back(p.dtype() == DType::f32
                              ? Tensor::empty(p.shape(), *preset_.autocast_dtype, p.suggest_memory_format())
                              : Tensor());
  }
}

PrecisionStep::~PrecisionStep() {
  if (prepared_.empty()) return;
  for (const Tensor& p : optimizer_->params()) amp::withdraw_offered_cast(p);
}

PrecisionStep::Plan PrecisionStep::plan(size_t micro_batches, bool injecting) const {
  Plan p;
  // A scaler over 16-bit parameters (no preset) would round the unscaled gradient in
  // place, which the fused pass does not do: that case stays unfused.
  p.fuse = fused_update_ && !(scaler_.is_enabled() && !masters_ && preset_.param_dtype != DType::f32);
  // O2 masters need their f32 .grad when micro-batches are summed (in f32, never in 16 bits)
  // or clipping reads them; otherwise the fused step reads the 16-bit gradients directly.
  // Data-parallel runs reduce f32 gradients: the masters' under O2.
  p.accumulate = masters_ && (!p.fuse || micro_batches > 1 || clip_grad_norm_ > 0 || dp_);
  // Data-parallel: the gradient buckets start while backward runs (the last micro-batch's
  // backward, when the gradients are final), except when a fault is injected after backward
  // or O2's masters sum several micro-batches first: then all are reduced after backward.
  p.overlap = dp_ && dp_->overlaps_backward() && !injecting && (!masters_ || micro_batches == 1);
  return p;
}

void PrecisionStep::begin_gradients(const Plan& plan) {
  optimizer_->zero_grad();
  if (masters_) masters_->zero_grad();
  model_->zero_grad();
  if (dp_) dp_->begin_gradients(optimizer_->params(), dp_weight_, dp_step_);
  if (plan.overlap && leaf_index_.empty()) {
    // The leaves backward fills, in optimizer order (a master's index is its model weight's).
    const std::vector<Tensor> leaves = model_->parameters();
    for (size_t i = 0; i < leaves.size(); ++i) leaf_index_[leaves[i].impl()] = i;
  }
}

double PrecisionStep::forward(const Batch& b, Tensor& loss) {
  {
    std::optional<amp::AutocastGuard> autocast;
    if (preset_.autocast_dtype) autocast.emplace(*preset_.autocast_dtype);
    loss = classification_loss((*model_)(model_input(b.images, preset_.param_dtype)), b.labels);
  }
  return loss.item();
}

void PrecisionStep::backward(const Tensor& loss, bool last, const Plan& plan) {
  {
    std::optional<LeafGradReadyHook> early;
    if (plan.overlap && last)
      early.emplace([this](const Tensor& leaf) {
        const auto it = leaf_index_.find(leaf.impl());
        if (it != leaf_index_.end()) throw_if_error(dp_->gradient_ready(it->second, leaf.grad()));
      });
    scaler_.scale(loss).backward();
  }
  if (plan.accumulate) masters_->accumulate_grads();  // f32 accumulation across micro-batches
}

void PrecisionStep::inject_inf(const std::string& name, const Plan& plan) {
  // An inf in one gradient, exactly what an f16 overflow produces; into the gradient the
  // update will read (a model weight's, when O2 fuses without masters' grads).
  const auto named = plan.accumulate ? masters_->named_masters() : model_->named_parameters();
  for (const auto& [n, p] : named) {
    if (!name.empty() && n != name) continue;
    Tensor g = p.grad();
    if (g.defined()) {
      store_from_double(g.data(), g.dtype(), 0, std::numeric_limits<double>::infinity());
      g.storage()->bump_version();
    }
    break;
  }
}

void PrecisionStep::reduce_over_ranks(Outcome& out) {
  // After the injection, which models a fault on this rank alone: the sum carries its inf
  // to every rank (and the scaler's found-inf MAX makes sure of the decision).
  throw_if_error(dp_->finish_gradients(optimizer_->params()));
  auto mean = dp_->mean_loss(out.loss, dp_weight_, dp_step_);
  throw_if_error(mean.status());
  out.loss = *mean;
  out.finite = std::isfinite(out.loss);
}

bool PrecisionStep::update(const Plan& plan) {
  if (clip_grad_norm_ > 0) {
    scaler_.unscale(*optimizer_);  // clip the true gradients
    optim::clip_grad_norm_(optimizer_->params(), clip_grad_norm_);
  }
  bool stepped;
  if (plan.fuse) {
    if (masters_) {
      masters_->fused_step_inputs(fused_grads_, fused_out_);
    } else {
      const auto& params = optimizer_->params();
      for (size_t i = 0; i < params.size(); ++i) fused_grads_[i] = params[i].grad();
      if (!prepared_.empty()) std::copy(prepared_.begin(), prepared_.end(), fused_out_.begin());
    }
    stepped = scaler_.step_fused(*optimizer_, fused_grads_, fused_out_);
    if (stepped && !prepared_.empty()) {
      const auto& params = optimizer_->params();
      for (size_t i = 0; i < params.size(); ++i)
        if (prepared_[i].defined() && fused_grads_[i].defined()) amp::offer_cast(params[i], prepared_[i]);
    }
    // Drop the references: the gradients belong to the parameters until the next zero_grad.
    std::fill(fused_grads_.begin(), fused_grads_.end(), Tensor());
    std::fill(fused_out_.begin(), fused_out_.end(), Tensor());
  } else {
    stepped = scaler_.step(*optimizer_);
  }
  scaler_.update();
  if (masters_ && stepped && !plan.fuse) masters_->copy_to_model();  // fused: written in the pass
  return stepped;
}

GradientUnderflow PrecisionStep::count_underflow(const Plan& plan) {
  // The gradients the update will read, by name (inject_inf picks them the same way).
  std::vector<std::pair<std::string, Tensor>> grads;
  for (const auto& [n, p] : plan.accumulate ? masters_->named_masters() : model_->named_parameters())
    grads.emplace_back(n, p.grad());
  return count_gradient_underflow(grads);
}

PrecisionStep::Outcome PrecisionStep::run(const std::vector<Batch>& micro_batches,
                                          const std::string* inject_into) {
  Outcome out;
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const auto t_start = Clock::now();
  out.scale_used = scaler_.get_scale();
  const Plan p = plan(micro_batches.size(), inject_into != nullptr);
  begin_gradients(p);
  const double inv_micro = 1.0 / double(micro_batches.size());
  auto t = Clock::now();
  out.update_ms = ms(t_start, t);
  {
    std::optional<BatchNormSyncGuard> synced_batch_norm;  // --sync-bn: every forward and backward
    if (bn_sync_) synced_batch_norm.emplace(bn_sync_);
    double loss_sum = 0.0;
    for (size_t k = 0; k < micro_batches.size(); ++k) {
      Tensor loss;
      const double v = forward(micro_batches[k], loss);
      loss_sum += v;
      if (!std::isfinite(v)) out.finite = false;
      const auto t_forward = Clock::now();
      out.forward_ms += ms(t, t_forward);
      if (micro_batches.size() > 1) loss = mul(loss, inv_micro);
      backward(loss, k + 1 == micro_batches.size(), p);
      t = Clock::now();
      out.backward_ms += ms(t_forward, t);
    }
    out.loss = loss_sum * inv_micro;
  }
  if (inject_into) inject_inf(*inject_into, p);  // fault injection (--inject-inf)
  if (dp_) reduce_over_ranks(out);
  if (underflow_due_) {  // before update(): it unscales (or clips) the gradients
    out.underflow = count_underflow(p);
    underflow_due_ = false;
  }
  out.stepped = update(p);
  out.update_ms += ms(t, Clock::now());
  return out;
}

Tensor PrecisionStep::predict(const Tensor& images) {
  NoGradGuard ng;
  std::optional<amp::AutocastGuard> autocast;
  if (preset_.autocast_dtype) autocast.emplace(*preset_.autocast_dtype);
  return (*model_)(model_input(images, preset_.param_dtype));
}

Tensor model_input(const Tensor& x, DType param_dtype) { return is_floating(x.dtype()) ? x.to(param_dtype) : x; }

Tensor classification_loss(const Tensor& logits, const Tensor& labels, Reduction r) {
  if (logits.dim() == 2) return cross_entropy(logits, labels, r);
  const int64_t classes = logits.size(logits.dim() - 1);
  return cross_entropy(reshape(logits, {logits.numel() / classes, classes}), reshape(labels, {labels.numel()}), r);
}

}  // namespace mixprec::train
