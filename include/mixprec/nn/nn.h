// nn.h: the module system (PyTorch's torch.nn, the parts these models need). Parameters
// are named hierarchically ("conv1.weight", "features.0.bias") and initialised as PyTorch
// does by default (kaiming_uniform with a = sqrt(5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/ops/ops.h"
#include "mixprec/core/tensor.h"

namespace mixprec::nn {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& input) = 0;
  // Runs forward, honouring this module's autocast override.
  Tensor operator()(const Tensor& input);
  // Runs body(input) with operator()'s handling of the autocast override: for a forward that
  // takes more than the input (an encoder layer given a padding mask).
  Tensor with_precision(const Tensor& input, const std::function<Tensor(const Tensor&)>& body);
  virtual const char* type_name() const = 0;

  // Depth-first, in registration order: "conv1.weight", "conv1.bias", "fc1.weight", ...
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  int64_t num_parameters() const;

  // Training mode switches behaviour of dropout and batch norm; recursive.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Sets every parameter's .grad to undefined (PyTorch's set_to_none=True default).
  void zero_grad();
  // Converts every parameter in place to dtype (half-precision inference, O2 weights).
  // Keeps requires_grad; drops any .grad. Buffers (running statistics) stay as they are.
  // keep_normalization_fp32: LayerNorm / BatchNorm2d parameters stay f32 (O2). Modules with
  // autocast off (set_autocast(false)) keep f32 parameters whatever dtype is asked for.
  void to(DType dtype, bool keep_normalization_fp32 = false);
  // Non-trainable state saved with the model (BatchNorm's running statistics).
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // LayerNorm and BatchNorm2d say yes: O2 keeps them in f32.
  virtual bool is_normalization() const { return false; }
  // Per-module autocast: false runs this module (and its children) with autocast off, its
  // floating inputs cast to f32 first (a precision-sensitive layer in an AMP model);
  // true forces it on; nullopt (default) inherits the caller's state. Without autocast (O2,
  // O3: 16-bit weights) an autocast-off module keeps f32 weights (to() skips it) and hands
  // its output back in its input's dtype, for the next layer.
  void set_autocast(std::optional<bool> enabled) { autocast_override_ = enabled; }
  std::optional<bool> autocast_override() const { return autocast_override_; }

 protected:
  Tensor& register_parameter(const std::string& name, Tensor value);
  Tensor& register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::optional<bool> autocast_override_;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input) override;  // [N, in] -> [N, out]
  const char* type_name() const override { return "Linear"; }
  Tensor weight;  // [out, in]
  Tensor bias;    // [out] or undefined
};

// nn.Conv2d: PyTorch's arguments and default initialisation (fan_in = in / groups x k x k),
// except that bias comes before dilation and groups (mixprec's callers passed it sixth
// before those existed; a bool would silently convert to dilation).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, bool bias = true, int64_t dilation = 1, int64_t groups = 1);
  Tensor forward(const Tensor& input) override;  // [N, C, H, W] -> [N, O, OH, OW]
  const char* type_name() const override { return "Conv2d"; }
  Tensor weight;  // [out, in / groups, k, k]
  Tensor bias;    // [out] or undefined
  int64_t stride, padding, dilation, groups;
};

// nn.Conv1d: PyTorch's arguments in its order and its default initialisation (fan_in =
// in / groups x k).
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& input) override;  // [N, C, L] -> [N, O, OL]
  const char* type_name() const override { return "Conv1d"; }
  Tensor weight;  // [out, in / groups, k]
  Tensor bias;    // [out] or undefined
  int64_t stride, padding, dilation, groups;
};

// nn.ConvTranspose2d: PyTorch's arguments in its order and initialisation: the weight is
// [in, out / groups, k, k] and PyTorch's fan_in is weight.size(1) x k x k, for the weight's
// bound and the bias's.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
                  int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, bool bias = true,
                  int64_t dilation = 1);
  Tensor forward(const Tensor& input) override;  // [N, C_in, H, W] -> [N, C_out, OH, OW]
  const char* type_name() const override { return "ConvTranspose2d"; }
  Tensor weight;  // [in, out / groups, k, k]
  Tensor bias;    // [out] or undefined
  int64_t stride, padding, output_padding, groups, dilation;
};

// nn.PReLU: num_parameters weights (1, or the input's channels), each `init` (0.25).
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& input) override { return prelu(input, weight); }
  const char* type_name() const override { return "PReLU"; }
  Tensor weight;  // [num_parameters]
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override { return relu(input); }
  const char* type_name() const override { return "ReLU"; }
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = -1, int64_t padding = 0)
      : kernel_(kernel_size), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& input) override {
    return max_pool2d(input, kernel_, stride_, padding_);
  }
  const char* type_name() const override { return "MaxPool2d"; }
  int64_t kernel() const { return kernel_; }
  int64_t stride() const { return stride_ < 0 ? kernel_ : stride_; }
  int64_t padding() const { return padding_; }

 private:
  int64_t kernel_, stride_, padding_;
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& input) override { return flatten(input, start_, end_); }
  const char* type_name() const override { return "Flatten"; }
  int64_t start_dim() const { return start_; }
  int64_t end_dim() const { return end_; }

 private:
  int64_t start_, end_;
};

// Children are named "0", "1", ... as in torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  Sequential& add(std::shared_ptr<Module> module);
  Sequential& add(const std::string& name, std::shared_ptr<Module> module);  // a named child
  // Runs the children in order; runs of Conv2d, ReLU, MaxPool2d(k, stride k, no padding) and
  // of ReLU, MaxPool2d(...) go through the fused ops (ops_fused.h), whose values and
  // gradients are the composition's (children with their own autocast setting are not fused).
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Sequential"; }
};

// x + body(x): a residual connection around a block whose output has its input's shape.
class Residual : public Module {
 public:
  // shortcut(x) + body(x); without a shortcut, x + body(x).
  explicit Residual(std::shared_ptr<Sequential> body, std::shared_ptr<Sequential> shortcut = nullptr);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Residual"; }
  std::shared_ptr<Sequential> body;      // child "body"
  std::shared_ptr<Sequential> shortcut;  // child "shortcut", or null
};

// Global average pooling, [N, C, H, W] -> [N, C] (torch: AdaptiveAvgPool2d(1) + flatten).
class GlobalAvgPool : public Module {
 public:
  Tensor forward(const Tensor& input) override { return mean(input, {2, 3}); }
  const char* type_name() const override { return "GlobalAvgPool"; }
};

// ---- normalisation, GELU and dropout (torch.nn.LayerNorm, BatchNorm2d, GELU, Dropout), with
// PyTorch's defaults, and the marker the O2 preset uses to keep normalisation in f32 ----
// Normalises over the trailing dims given by normalized_shape.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;  // [..., *normalized_shape] -> same shape
  const char* type_name() const override { return "LayerNorm"; }
  bool is_normalization() const override { return true; }
  Tensor weight;  // normalized_shape, ones; undefined without elementwise_affine
  Tensor bias;    // normalized_shape, zeros; undefined without elementwise_affine
  Shape normalized_shape;
  double eps;
};

// Per-channel batch normalisation of [N, C, H, W]. Training mode (is_training()) uses the
// batch statistics and updates the running ones; eval mode uses the running ones.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& input) override;  // [N, C, H, W] -> same shape
  const char* type_name() const override { return "BatchNorm2d"; }
  bool is_normalization() const override { return true; }
  Tensor weight;  // [C], ones (parameter)
  Tensor bias;    // [C], zeros (parameter)
  // Buffers (named_buffers()), not parameters: f32, no grad, updated in place by
  // training-mode forward.
  Tensor running_mean;  // [C], zeros
  Tensor running_var;   // [C], ones
  int64_t num_features;
  double eps, momentum;
};

// Exact (erf) GELU.
class GELU : public Module {
 public:
  Tensor forward(const Tensor& input) override { return gelu(input); }
  const char* type_name() const override { return "GELU"; }
};

// torch.nn.Embedding: a [num_embeddings, dim] table looked up by integer indices
// (embedding op); weight initialised N(0, 1) as PyTorch's.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& indices) override;  // [...] i64 -> [..., dim]
  const char* type_name() const override { return "Embedding"; }
  Tensor weight;  // [num_embeddings, dim]
};

// Zeroes elements with probability p in training mode; the identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Dropout"; }
  double p;
};

// True for LayerNorm and BatchNorm2d: layers whose parameters the O2 preset keeps in f32.
bool is_normalization_layer(const Module& module);

// One line per module with its parameters' shapes and dtypes (like print(model)).
std::string summary(const Module& module);

}  // namespace mixprec::nn
