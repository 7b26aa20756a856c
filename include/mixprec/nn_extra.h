// nn_extra.h: normalisation, GELU and dropout layers (torch.nn.LayerNorm, BatchNorm2d,
// GELU, Dropout) with PyTorch's defaults, and the marker the O2 preset uses to keep
// normalisation layers in f32.
#pragma once
#include <cstdint>

#include "mixprec/nn.h"
#include "mixprec/ops_extra.h"

namespace mixprec::nn {

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

}  // namespace mixprec::nn
