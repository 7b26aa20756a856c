// optimizer.cpp: the common step loops (step, and step_fused for mixed precision: gradients
// read in their own dtype and unscaled on the fly, 16-bit weight copies written in the same
// pass) and gradient clipping.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/tensor_impl.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/optim/optim.h"
#include "mixprec/core/status.h"
#include "optim/update_kernels.h"

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
    Tensor g = params_[i].grad();
    if (g.defined()) apply_update(i, g, 1.0f, nullptr);
  }
}

void Optimizer::step_fused(std::span<const Tensor> grads, float grad_scale, std::span<const Tensor> rounded_out) {
  auto bad = [](const std::string& what) { throw Error(Status::invalid_argument("Optimizer::step_fused: " + what)); };
  if (grads.size() != params_.size())
    bad(std::to_string(grads.size()) + " gradients for " + std::to_string(params_.size()) + " parameters");
  if (!rounded_out.empty() && rounded_out.size() != params_.size())
    bad(std::to_string(rounded_out.size()) + " rounded outputs for " + std::to_string(params_.size()) + " parameters");
  if (!std::isfinite(grad_scale)) bad("grad_scale must be finite, got " + std::to_string(grad_scale));
  // Everything is checked before anything is updated, so a bad argument changes nothing.
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (grads[i].defined()) {
      if (grads[i].shape() != p.shape() || !is_floating(grads[i].dtype()))
        bad("gradient " + std::to_string(i) + " is " + grads[i].str() + ", expected the shape of " + p.str());
      if (grad_scale != 1.0f && p.dtype() != DType::f32 && p.dtype() != DType::f64)
        bad("grad_scale must be 1 for the 16-bit parameter " + std::to_string(i) + " (" + p.str() + ")");
    }
    if (!rounded_out.empty() && rounded_out[i].defined()) {
      const Tensor& o = rounded_out[i];
      if (p.dtype() != DType::f32 || !is_half(o.dtype()) ||
          o.shape() != p.shape() || o.strides() != p.strides() || !o.is_dense())
        bad("rounded output " + std::to_string(i) + " is " + o.str() +
            ", expected bf16/f16 laid out like the f32 parameter " + p.str());
    }
  }
  NoGradGuard ng;
  MemoryCategoryGuard mg(MemoryCategory::optimizer_state);
  ++step_count_;
  for (size_t i = 0; i < params_.size(); ++i)
    if (grads[i].defined())
      apply_update(i, grads[i], grad_scale, rounded_out.empty() ? nullptr : &rounded_out[i]);
}

void Optimizer::apply_update(size_t index, const Tensor& grad, float grad_scale, const Tensor* rounded_out) {
  Tensor& p = params_[index];
  // The kernels read a dense gradient laid out like the parameter, in its dtype or (f32
  // parameter) bf16/f16. Anything else is first copied into the parameter's dtype and
  // layout (allocates; not the case of any preset's step).
  const bool readable = grad.strides() == p.strides() && grad.is_dense() &&
                        (grad.dtype() == p.dtype() ||
                         (p.dtype() == DType::f32 && is_half(grad.dtype())));
  Tensor g = grad;
  if (!readable) {
    g = Tensor::empty(p.shape(), p.dtype(), p.suggest_memory_format());
    g.copy_(grad);
  }
  const bool has_out = rounded_out && rounded_out->defined();
  update_fused(index, p, UpdateInput{g, grad_scale, has_out ? rounded_out : nullptr});
  p.storage()->bump_version();
  if (has_out) rounded_out->storage()->bump_version();  // invalidates the weight's cast caches
}

void Optimizer::update_fused(size_t index, Tensor& param, const UpdateInput& in) {
  // Two passes, same numbers: the scaled gradient in the parameter's dtype, then update().
  const bool plain = in.grad.dtype() == param.dtype() && in.grad_scale == 1.0f;
  update(index, param, plain ? in.grad : scaled_grad_like(param, in.grad, in.grad_scale));
  if (in.rounded_out && in.rounded_out->defined()) {
    Tensor out = *in.rounded_out;
    out.copy_(param);
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.set_grad(Tensor());
}

namespace {

// The squares of a gradient's values summed in double. f32 buffers (every gradient the
// optimizers see but f64 ones and O2 16-bit ones without masters) go in chunks of kNormChunk
// values spread over the threads, each chunk in 8 lanes added in a fixed order and the
// chunks' sums added in order: the same bits whatever the thread count, so a run's norm does
// not depend on --threads. (It was a double copy of every gradient, ~9% of a gpt-tiny step.)
constexpr int64_t kNormChunk = int64_t(1) << 14;

double sum_of_squares(const Tensor& g) {
  if (g.dtype() != DType::f32 || !g.is_dense()) {
    double total = 0.0;
    for (double v : g.to_vector_f64()) total += v * v;
    return total;
  }
  const float* x = g.data_ptr<float>();
  const int64_t n = g.numel(), chunks = (n + kNormChunk - 1) / kNormChunk;
  thread_local std::vector<double> part;
  part.assign(size_t(chunks), 0.0);
  double* out = part.data();
#pragma omp parallel for schedule(static) if (chunks > 4)
  for (int64_t c = 0; c < chunks; ++c) {
    const float* p = x + c * kNormChunk;
    const int64_t len = std::min(kNormChunk, n - c * kNormChunk);
    double lane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
#pragma omp simd
      for (int l = 0; l < 8; ++l) lane[l] += double(p[i + l]) * double(p[i + l]);
    for (int l = 0; i < len; ++i, ++l) lane[l] += double(p[i]) * double(p[i]);
    out[c] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += out[c];
  return total;
}

// g := g * coef, each value computed in double and rounded once to g's dtype.
void scale_gradient(Tensor& g, double coef) {
  if (g.dtype() == DType::f32 && g.is_dense()) {
    float* x = g.data_ptr<float>();
    const int64_t n = g.numel();
#pragma omp parallel for simd schedule(static) if (n > 4 * kNormChunk)
    for (int64_t i = 0; i < n; ++i) x[i] = float(double(x[i]) * coef);
    g.storage()->bump_version();
    return;
  }
  std::vector<double> v = g.to_vector_f64();
  for (double& x : v) x *= coef;
  g.copy_(Tensor::from_vector_f64(v, g.shape(), DType::f64));
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  double total = 0.0;
  for (const auto& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) total += sum_of_squares(g);
  }
  const double norm = std::sqrt(total);
  // PyTorch: clip_coef = max_norm / (total_norm + 1e-6), applied only when < 1.
  const double coef = max_norm / (norm + 1e-6);
  if (std::isfinite(norm) && coef < 1.0) {
    for (const auto& p : params) {
      Tensor g = p.grad();
      if (g.defined()) scale_gradient(g, coef);
    }
  }
  return norm;
}

}  // namespace mixprec::optim
