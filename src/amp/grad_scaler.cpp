// grad_scaler.cpp: the scaler's state machine. Per optimizer and step: ready ->
// (unscale) -> unscaled -> (step) -> stepped; update() returns every optimizer to ready.
// The scale is f32 like PyTorch's _scale tensor; growth and backoff multiply it by the double
// factor in double and round to f32 once, as PyTorch's _amp_update_scale_ kernel does
// (`static_cast<float>(current_scale * growth_factor)`), so sequences match bit for bit
// (tests/golden/optim_golden_test.cpp).
#include "mixprec/amp/grad_scaler.h"

#include <cmath>

#include "core/nonfinite_scan.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"

namespace mixprec::amp {

namespace {

void check_factor(const char* name, double v, bool above_one) {
  const bool ok = std::isfinite(v) && (above_one ? v > 1.0 : (v > 0.0 && v < 1.0));
  if (!ok)
    throw Error(Status::invalid_argument(std::string("GradScaler: ") + name + " must be " +
                                         (above_one ? "> 1" : "in (0, 1)") + ", got " +
                                         std::to_string(v)));
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions o) : options_(o), scale_(float(o.init_scale)),
                                              hysteresis_tracker_(o.hysteresis) {
  if (!(o.init_scale > 0) || !std::isfinite(o.init_scale))
    throw Error(Status::invalid_argument("GradScaler: init_scale must be a positive finite number, got " +
                                         std::to_string(o.init_scale)));
  check_factor("growth_factor", o.growth_factor, true);
  check_factor("backoff_factor", o.backoff_factor, false);
  if (o.growth_interval < 1)
    throw Error(Status::invalid_argument("GradScaler: growth_interval must be >= 1, got " +
                                         std::to_string(o.growth_interval)));
  if (o.hysteresis < 1)
    throw Error(Status::invalid_argument("GradScaler: hysteresis must be >= 1, got " +
                                         std::to_string(o.hysteresis)));
  if (o.min_scale && o.max_scale && *o.min_scale > *o.max_scale)
    throw Error(Status::invalid_argument("GradScaler: min_scale > max_scale"));
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return mul(loss.to(DType::f32), double(scale_));
}

void GradScaler::name_parameters(const std::vector<std::pair<std::string, Tensor>>& named) {
  for (const auto& [name, t] : named) names_[t.impl()] = name;
}

std::string GradScaler::param_name(const Tensor& p, size_t index) const {
  auto it = names_.find(p.impl());
  return it != names_.end() ? it->second : "param." + std::to_string(index);
}

void GradScaler::unscale(optim::Optimizer& opt) {
  if (!options_.enabled) return;
  PerOptimizer& st = per_optimizer_[&opt];
  if (st.stage == Stage::unscaled)
    throw Error(Status::invalid_argument(
        "GradScaler::unscale: unscale() has already been called on this optimizer since the last update()"));
  if (st.stage == Stage::stepped)
    throw Error(Status::invalid_argument("GradScaler::unscale: unscale() is being called after step()"));
  // PyTorch: inv_scale = 1 / scale in double, rounded to f32.
  const float inv = float(1.0 / double(scale_));
  NoGradGuard ng;
  const auto& params = opt.params();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    if (g.dtype() == DType::f16 && !options_.allow_fp16_grads)
      throw Error(Status::invalid_argument(
          "GradScaler::unscale: attempting to unscale f16 gradients (" + param_name(params[i], i) +
          "); keep f32 master weights (an amp-* or o2-* preset) or set allow_fp16_grads"));
    UnscaleResult r = unscale_and_check(g, inv);
    if (r.nonfinite > 0) {
      st.found_inf = true;
      pending_nonfinite_.push_back({param_name(params[i], i), r.nonfinite, r.first_index});
    }
  }
  st.stage = Stage::unscaled;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    ++applied_steps_;
    return true;
  }
  PerOptimizer& st = per_optimizer_[&opt];
  if (st.stage == Stage::stepped)
    throw Error(Status::invalid_argument("GradScaler::step: step() has already been called since the last update()"));
  if (st.stage == Stage::ready) unscale(opt);
  st.stage = Stage::stepped;
  if (combine_) st.found_inf = combine_(st.found_inf);
  if (st.found_inf) return false;
  opt.step();
  return true;
}

bool GradScaler::step_fused(optim::Optimizer& opt, std::span<const Tensor> grads,
                            std::span<const Tensor> rounded_out) {
  const auto& params = opt.params();
  if (grads.size() != params.size())
    throw Error(Status::invalid_argument("GradScaler::step_fused: " + std::to_string(grads.size()) +
                                         " gradients for " + std::to_string(params.size()) + " parameters"));
  if (!options_.enabled) {
    opt.step_fused(grads, 1.0f, rounded_out);
    ++applied_steps_;
    return true;
  }
  PerOptimizer& st = per_optimizer_[&opt];
  if (st.stage == Stage::stepped)
    throw Error(Status::invalid_argument("GradScaler::step_fused: step() has already been called since the last update()"));
  float grad_scale = 1.0f;  // after an explicit unscale() the gradients are already true ones
  if (st.stage == Stage::ready) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (!grads[i].defined()) continue;
      const DType pd = params[i].dtype();
      if (pd == DType::f16 && grads[i].dtype() == DType::f16 && !options_.allow_fp16_grads)
        throw Error(Status::invalid_argument(
            "GradScaler::step_fused: attempting to unscale f16 gradients (" + param_name(params[i], i) +
            "); keep f32 master weights (an amp-* or o2-* preset) or set allow_fp16_grads"));
      if (pd != DType::f32 && pd != DType::f64)
        throw Error(Status::invalid_argument(
            "GradScaler::step_fused: parameter " + param_name(params[i], i) + " is " + params[i].str() +
            "; the fused step unscales into f32 parameters only (use unscale() + step())"));
    }
    // Read-only: a skipped step must leave every gradient, parameter and state untouched,
    // so the check finishes before the update pass starts.
    NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!grads[i].defined()) continue;
      UnscaleResult r = find_nonfinite(grads[i]);
      if (r.nonfinite > 0) {
        st.found_inf = true;
        pending_nonfinite_.push_back({param_name(params[i], i), r.nonfinite, r.first_index});
      }
    }
    grad_scale = float(1.0 / double(scale_));  // PyTorch's inv_scale, as unscale() uses
  }
  st.stage = Stage::stepped;
  if (combine_) st.found_inf = combine_(st.found_inf);
  if (st.found_inf) return false;
  opt.step_fused(grads, grad_scale, rounded_out);
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  bool found_inf = false;
  for (auto& [opt, st] : per_optimizer_) found_inf = found_inf || st.found_inf;
  if (new_scale) {
    if (!(*new_scale > 0) || !std::isfinite(*new_scale))
      throw Error(Status::invalid_argument("GradScaler::update: new_scale must be a positive finite number"));
    scale_ = float(*new_scale);
  } else {
    if (per_optimizer_.empty())
      throw Error(Status::invalid_argument("GradScaler::update: no inf checks were recorded prior to update() "
                                           "(call unscale() or step() first)"));
    if (found_inf) {
      growth_tracker_ = 0;
      if (--hysteresis_tracker_ <= 0) {
        float s = float(double(scale_) * options_.backoff_factor);  // one rounding
        if (options_.min_scale) s = std::max(s, float(*options_.min_scale));
        scale_ = s;
        hysteresis_tracker_ = options_.hysteresis;
      }
    } else if (++growth_tracker_ == options_.growth_interval) {
      float s = float(double(scale_) * options_.growth_factor);  // one rounding
      if (options_.max_scale) s = std::min(s, float(*options_.max_scale));
      if (std::isfinite(s)) scale_ = s;  // never grow into inf
      growth_tracker_ = 0;
      hysteresis_tracker_ = options_.hysteresis;
    }
  }
  last_skipped_ = found_inf;
  (found_inf ? skipped_steps_ : applied_steps_) += 1;
  last_nonfinite_ = std::move(pending_nonfinite_);
  pending_nonfinite_.clear();
  per_optimizer_.clear();
}

double GradScaler::get_scale() const { return options_.enabled ? double(scale_) : 1.0; }

void GradScaler::set_growth_factor(double v) {
  check_factor("growth_factor", v, true);
  options_.growth_factor = v;
}
void GradScaler::set_backoff_factor(double v) {
  check_factor("backoff_factor", v, false);
  options_.backoff_factor = v;
}
void GradScaler::set_growth_interval(int64_t v) {
  if (v < 1) throw Error(Status::invalid_argument("GradScaler: growth_interval must be >= 1"));
  options_.growth_interval = v;
}

std::map<std::string, double> GradScaler::state_dict() const {
  if (!options_.enabled) return {};  // PyTorch returns an empty dict when disabled
  return {{"scale", double(scale_)},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", double(options_.growth_interval)},
          {"_growth_tracker", double(growth_tracker_)},
          {"_hysteresis_tracker", double(hysteresis_tracker_)},
          {"applied_steps", double(applied_steps_)},
          {"skipped_steps", double(skipped_steps_)}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  if (!options_.enabled) throw Error(Status::invalid_argument("GradScaler::load_state_dict: scaler is disabled"));
  if (state.empty())
    throw Error(Status::invalid_argument("GradScaler::load_state_dict: the state is empty (saved from a disabled scaler?)"));
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    if (!state.count(key))
      throw Error(Status::invalid_argument(std::string("GradScaler::load_state_dict: missing key '") + key + "'"));
  scale_ = float(state.at("scale"));
  set_growth_factor(state.at("growth_factor"));
  set_backoff_factor(state.at("backoff_factor"));
  set_growth_interval(int64_t(state.at("growth_interval")));
  growth_tracker_ = int64_t(state.at("_growth_tracker"));
  auto get = [&](const char* k, double d) { return state.count(k) ? state.at(k) : d; };
  hysteresis_tracker_ = int64_t(get("_hysteresis_tracker", double(options_.hysteresis)));
  applied_steps_ = int64_t(get("applied_steps", 0));
  skipped_steps_ = int64_t(get("skipped_steps", 0));
}

}  // namespace mixprec::amp
