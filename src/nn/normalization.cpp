// normalization.cpp: LayerNorm and BatchNorm2d with PyTorch's defaults (affine weight ones,
// bias zeros, running_mean zeros, running_var ones), and the marker O2 uses to keep them f32.
#include <cmath>
#include <string>

#include "mixprec/nn/nn.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

namespace {

Tensor filled(const Shape& shape, double value) {
  MemoryCategoryGuard mg(MemoryCategory::parameters);
  return Tensor::full(shape, value, DType::f32);
}

void check_eps(const char* layer, double eps) {
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw Error(Status::invalid_argument(
        std::string(layer) + ": eps must be finite and >= 0, got " + std::to_string(eps)));
}

}  // namespace

LayerNorm::LayerNorm(Shape normalized_shape_, double eps_, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape_)), eps(eps_) {
  if (normalized_shape.empty())
    throw Error(
        Status::invalid_argument("LayerNorm: normalized_shape must have at least one dim, got []"));
  for (int64_t s : normalized_shape)
    if (s < 1)
      throw Error(Status::invalid_argument("LayerNorm: normalized_shape " +
                                           shape_str(normalized_shape) + " has a dim < 1"));
  check_eps("LayerNorm", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", filled(normalized_shape, 1.0));
    bias = register_parameter("bias", filled(normalized_shape, 0.0));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

BatchNorm2d::BatchNorm2d(int64_t num_features_, double eps_, double momentum_)
    : num_features(num_features_), eps(eps_), momentum(momentum_) {
  if (num_features < 1)
    throw Error(Status::invalid_argument("BatchNorm2d: num_features must be >= 1, got " +
                                         std::to_string(num_features)));
  check_eps("BatchNorm2d", eps);
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw Error(Status::invalid_argument("BatchNorm2d: momentum must be in [0, 1], got " +
                                         std::to_string(momentum)));
  weight = register_parameter("weight", filled({num_features}, 1.0));
  bias = register_parameter("bias", filled({num_features}, 0.0));
  running_mean = register_buffer("running_mean", filled({num_features}, 0.0));
  running_var = register_buffer("running_var", filled({num_features}, 1.0));
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  if (input.dim() != 4 || input.size(1) != num_features)
    throw Error(Status::invalid_argument("BatchNorm2d: input " + shape_str(input.shape()) +
                                         " does not fit (expected [N, " +
                                         std::to_string(num_features) + ", H, W])"));
  return batch_norm(input, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

bool is_normalization_layer(const Module& module) {
  return dynamic_cast<const LayerNorm*>(&module) != nullptr ||
         dynamic_cast<const BatchNorm2d*>(&module) != nullptr;
}

}  // namespace mixprec::nn
