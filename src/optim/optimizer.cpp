// optimizer.cpp: the common step loop and gradient clipping.
#include <cmath>

#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/optim.h"
#include "mixprec/status.h"

namespace mixprec::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined() || !is_floating(params_[i].dtype()))
      throw Error(Status::invalid_argument("optimizer: parameter " + std::to_string(i) +
                                           " must be a defined floating tensor, got " + params_[i].str()));
  }
  if (!(lr >= 0.0))
    throw Error(Status::invalid_argument("optimizer: lr must be >= 0, got " + std::to_string(lr)));
}

void Optimizer::step() {
  NoGradGuard ng;
  MemoryCategoryGuard mg(MemoryCategory::optimizer_state);
  ++step_count_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() != p.dtype() || g.strides() != p.strides()) {
      Tensor conv = Tensor::empty(p.shape(), p.dtype(), p.suggest_memory_format());
      conv.copy_(g);
      g = conv;
    }
    update(i, p, g);
    p.storage()->bump_version();
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.set_grad(Tensor());
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  double total = 0.0;
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    for (double v : g.to_vector_f64()) total += v * v;
  }
  const double norm = std::sqrt(total);
  // PyTorch: clip_coef = max_norm / (total_norm + 1e-6), applied only when < 1.
  const double coef = max_norm / (norm + 1e-6);
  if (std::isfinite(norm) && coef < 1.0) {
    for (const auto& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      std::vector<double> v = g.to_vector_f64();
      for (double& x : v) x *= coef;
      g.copy_(Tensor::from_vector_f64(v, g.shape(), DType::f64));
    }
  }
  return norm;
}

}  // namespace mixprec::optim
