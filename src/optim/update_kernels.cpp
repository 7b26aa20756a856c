// update_kernels.cpp: fused optimizer loops. Computed in the parameter's dtype for f32 and
// f64 (T below); 16-bit parameters are updated through an f32 copy (O2 uses f32 masters,
// so this path is only for pure-16-bit presets).
#include "optim/update_kernels.h"

#include <cmath>

#include "mixprec/status.h"

namespace mixprec::optim {
namespace {

template <typename T>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, T lr, T momentum, T dampening, T wd,
              bool nesterov, bool first_step) {
#pragma omp parallel for if (n > 100000)
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i];
    if (wd != T(0)) d = d + wd * p[i];
    if (momentum != T(0)) {
      buf[i] = first_step ? d : buf[i] * momentum + (T(1) - dampening) * d;
      d = nesterov ? d + momentum * buf[i] : buf[i];
    }
    p[i] = p[i] + (-lr) * d;
  }
}

template <typename T>
void adam_loop(T* p, const T* g, T* m, T* v, int64_t n, T lr, T beta1, T beta2, T eps, T wd,
               bool decoupled, double bias_correction1, double bias_correction2) {
  const T step_size = T(double(lr) / bias_correction1);
  const T bc2_sqrt = T(std::sqrt(bias_correction2));
  const T decay = T(1.0 - double(lr) * double(wd));
#pragma omp parallel for if (n > 100000)
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if (decoupled) {
      p[i] = p[i] * decay;
    } else if (wd != T(0)) {
      gi = gi + wd * p[i];
    }
    m[i] = m[i] * beta1 + (T(1) - beta1) * gi;
    v[i] = v[i] * beta2 + (T(1) - beta2) * (gi * gi);
    const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] = p[i] + (-step_size) * (m[i] / denom);
  }
}

void check_same(const char* op, const Tensor& p, const Tensor& other) {
  if (!other.defined()) return;
  if (other.dtype() != p.dtype() || other.strides() != p.strides() || other.shape() != p.shape())
    throw Error(Status::invalid_argument(std::string(op) + ": state " + other.str() +
                                         " does not match parameter " + p.str()));
}

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& buf, double lr, double momentum,
                double dampening, double weight_decay, bool nesterov, bool first_step) {
  check_same("sgd", param, grad);
  check_same("sgd", param, buf);
  const int64_t n = param.numel();
  if (param.dtype() == DType::f64) {
    sgd_loop<double>(param.data_ptr<double>(), grad.data_ptr<double>(),
                     buf.defined() ? buf.data_ptr<double>() : nullptr, n, lr, momentum, dampening,
                     weight_decay, nesterov, first_step);
  } else if (param.dtype() == DType::f32) {
    sgd_loop<float>(param.data_ptr<float>(), grad.data_ptr<float>(),
                    buf.defined() ? buf.data_ptr<float>() : nullptr, n, float(lr), float(momentum),
                    float(dampening), float(weight_decay), nesterov, first_step);
  } else {
    // 16-bit parameters: compute in f32 and round back once.
    Tensor p32 = param.to(DType::f32), g32 = grad.to(DType::f32);
    Tensor b32 = buf.defined() ? buf.to(DType::f32) : Tensor();
    sgd_update(p32, g32, b32, lr, momentum, dampening, weight_decay, nesterov, first_step);
    param.copy_(p32);
    if (buf.defined()) buf.copy_(b32);
  }
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool decoupled, int64_t step) {
  check_same("adam", param, grad);
  check_same("adam", param, exp_avg);
  check_same("adam", param, exp_avg_sq);
  const double bc1 = 1.0 - std::pow(beta1, double(step));
  const double bc2 = 1.0 - std::pow(beta2, double(step));
  const int64_t n = param.numel();
  if (param.dtype() == DType::f64) {
    adam_loop<double>(param.data_ptr<double>(), grad.data_ptr<double>(), exp_avg.data_ptr<double>(),
                      exp_avg_sq.data_ptr<double>(), n, lr, beta1, beta2, eps, weight_decay,
                      decoupled, bc1, bc2);
  } else if (param.dtype() == DType::f32) {
    adam_loop<float>(param.data_ptr<float>(), grad.data_ptr<float>(), exp_avg.data_ptr<float>(),
                     exp_avg_sq.data_ptr<float>(), n, float(lr), float(beta1), float(beta2),
                     float(eps), float(weight_decay), decoupled, bc1, bc2);
  } else {
    Tensor p32 = param.to(DType::f32), g32 = grad.to(DType::f32);
    Tensor m32 = exp_avg.to(DType::f32), v32 = exp_avg_sq.to(DType::f32);
    adam_update(p32, g32, m32, v32, lr, beta1, beta2, eps, weight_decay, decoupled, step);
    param.copy_(p32);
    exp_avg.copy_(m32);
    exp_avg_sq.copy_(v32);
  }
}

Tensor restored_like(const Tensor& param, const Tensor& src, const std::string& name) {
  if (src.shape() != param.shape())
    throw Error(Status::invalid_argument("optimizer state '" + name + "': shape " + shape_str(src.shape()) +
                                         ", expected " + shape_str(param.shape())));
  MemoryCategoryGuard mg(MemoryCategory::optimizer_state);
  Tensor t = Tensor::empty(param.shape(), param.dtype(), param.suggest_memory_format());
  t.copy_(src);
  return t;
}

}  // namespace mixprec::optim
