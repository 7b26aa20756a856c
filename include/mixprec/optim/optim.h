// optim.h: SGD, Adam and AdamW with PyTorch's defaults and update formulas, plus gradient
// clipping. Parameters are updated in place (their version bumps, which invalidates
// autocast's weight-cast cache). For f32 parameters an update is bit-identical to PyTorch
// 1.13's torch.optim.SGD / Adam / AdamW(foreach=False) on the CPU, given the same
// parameters, gradients and state (formulas, f32 rounding points and FMA use as ATen's
// kernels; golden-tested in tests/golden/optim_golden_test.cpp, see docs/api.md).
#pragma once
#include <map>
#include <span>
#include <string>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::optim {

// One parameter's input to a fused update (Optimizer::step_fused).
struct UpdateInput {
  const Tensor& grad;     // dense, the parameter's strides, its dtype or (f32 parameter) bf16/f16
  float grad_scale = 1.0f;  // each gradient element is multiplied by this as it is read
  const Tensor* rounded_out = nullptr;  // bf16/f16 like the parameter: receives round(param)
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  // One update from the parameters' current .grad (parameters without a grad are skipped).
  void step();
  // The fused step (mixed precision): one pass per parameter that reads grads[i] instead of
  // .grad, multiplies each element by grad_scale as it reads (the 1/loss-scale unscale),
  // updates the parameter and its state and, where rounded_out[i] is defined, writes the
  // updated parameter rounded to nearest even into that 16-bit tensor (an O2 model weight
  // whose f32 master the parameter is). The result is bit-identical to: widen grads[i] to
  // the parameter's dtype, multiply by grad_scale in that dtype, step(), then
  // rounded_out[i].copy_(param). grads[i] may be the parameter's dtype or, for an f32
  // parameter, bf16/f16; an undefined grads[i] skips the parameter. grads.size() must equal
  // params().size(); rounded_out is empty or the same size. A 16-bit parameter needs
  // grad_scale 1 (unscaling a 16-bit gradient rounds it, which this pass does not). No
  // inf/NaN check happens here: GradScaler::step_fused checks before calling it.
  void step_fused(std::span<const Tensor> grads, float grad_scale = 1.0f,
                  std::span<const Tensor> rounded_out = {});
  // Sets every .grad to undefined (PyTorch's set_to_none=True).
  void zero_grad();
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t step_count() const { return step_count_; }
  virtual const char* name() const = 0;
  // Optimizer state tensors ("exp_avg.3", "momentum_buffer.0", ...) for checkpoints.
  virtual std::map<std::string, Tensor> state_tensors() const = 0;
  // Restores what state_tensors() returned (a checkpoint); names and shapes must match.
  virtual void load_state_tensors(const std::map<std::string, Tensor>& state) = 0;
  void set_step_count(int64_t n) { step_count_ = n; }

 protected:
  virtual void update(size_t index, Tensor& param, const Tensor& grad) = 0;
  // The fused form of update() (see step_fused). The default materialises the scaled
  // gradient, calls update() and copies the rounded parameter out: right for any subclass,
  // one pass only for those that override it (SGD, Adam).
  virtual void update_fused(size_t index, Tensor& param, const UpdateInput& in);
  std::vector<Tensor> params_;
  double lr_;
  int64_t step_count_ = 0;

 private:
  void apply_update(size_t index, const Tensor& grad, float grad_scale, const Tensor* rounded_out);
};

struct SGDOptions {
  double lr = 1e-3;  // PyTorch requires lr for SGD; the CLI's default
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;  // ascend: the gradient is negated first (PyTorch's maximize)
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  const char* name() const override { return "sgd"; }
  std::map<std::string, Tensor> state_tensors() const override;
  void load_state_tensors(const std::map<std::string, Tensor>& state) override;

 private:
  void update(size_t index, Tensor& param, const Tensor& grad) override;
  void update_fused(size_t index, Tensor& param, const UpdateInput& in) override;
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 added to the gradient; AdamW: decoupled (default 1e-2)
  bool amsgrad = false;       // normalise by the running maximum of exp_avg_sq (state max_exp_avg_sq)
  bool maximize = false;      // ascend: the gradient is negated first
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {}, bool decoupled_weight_decay = false);
  const char* name() const override { return decoupled_ ? "adamw" : "adam"; }
  std::map<std::string, Tensor> state_tensors() const override;
  void load_state_tensors(const std::map<std::string, Tensor>& state) override;

 private:
  void update(size_t index, Tensor& param, const Tensor& grad) override;
  void update_fused(size_t index, Tensor& param, const UpdateInput& in) override;
  AdamOptions options_;
  bool decoupled_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};

// AdamW: Adam with decoupled weight decay, PyTorch default weight_decay 1e-2.
class AdamW : public Adam {
 public:
  static AdamOptions defaults() {
    AdamOptions o;
    o.weight_decay = 1e-2;
    return o;
  }
  explicit AdamW(std::vector<Tensor> params, AdamOptions options = defaults())
      : Adam(std::move(params), options, true) {}
};

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm
// before clipping (PyTorch's clip_grad_norm_). Non-finite norms leave gradients as they are.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace mixprec::optim
