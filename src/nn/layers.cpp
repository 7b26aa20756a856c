// layers.cpp: Linear, Conv2d, Conv1d and ConvTranspose2d with PyTorch's default
// initialisation, PReLU, and Dropout.
#include <cmath>

#include "mixprec/nn/nn.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

namespace {

// kaiming_uniform_(a = sqrt(5)) reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)):
// gain = sqrt(2 / (1 + a^2)) = sqrt(1/3), bound = gain * sqrt(3 / fan_in).
Tensor default_init(const Shape& shape, int64_t fan_in) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  MemoryCategoryGuard mg(MemoryCategory::parameters);
  return Tensor::uniform(shape, -bound, bound, DType::f32);
}

void check_positive(const char* layer, const char* field, int64_t v) {
  if (v < 1)
    throw Error(Status::invalid_argument(std::string(layer) + ": " + field + " must be >= 1, got " +
                                         std::to_string(v)));
}

// PyTorch's rule for groups: both channel counts split into them evenly.
void check_groups(const char* layer, int64_t in_channels, int64_t out_channels, int64_t groups) {
  check_positive(layer, "groups", groups);
  if (in_channels % groups != 0 || out_channels % groups != 0)
    throw Error(Status::invalid_argument(std::string(layer) + ": in_channels " + std::to_string(in_channels) +
                                         " and out_channels " + std::to_string(out_channels) +
                                         " must be divisible by groups " + std::to_string(groups)));
}

// What every convolution layer checks of its arguments, in this order.
void check_conv(const char* layer, int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                int64_t dilation, int64_t groups) {
  check_positive(layer, "in_channels", in_channels);
  check_positive(layer, "out_channels", out_channels);
  check_positive(layer, "kernel_size", kernel_size);
  check_positive(layer, "dilation", dilation);
  check_groups(layer, in_channels, out_channels, groups);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  check_positive("Linear", "in_features", in_features);
  check_positive("Linear", "out_features", out_features);
  weight = register_parameter("weight", default_init({out_features, in_features}, in_features));
  if (with_bias) bias = register_parameter("bias", default_init({out_features}, in_features));
}

Tensor Linear::forward(const Tensor& input) { return linear(input, weight, bias); }

// The weight is [out, in / groups, k...]; PyTorch's fan_in is its dim 1 times the kernel's
// size, for the weight's bound and the bias's.
Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride_,
               int64_t padding_, bool with_bias, int64_t dilation_, int64_t groups_)
    : stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_conv("Conv2d", in_channels, out_channels, kernel_size, dilation, groups);
  const int64_t fan_in = in_channels / groups * kernel_size * kernel_size;
  weight = register_parameter(
      "weight", default_init({out_channels, in_channels / groups, kernel_size, kernel_size}, fan_in));
  if (with_bias) bias = register_parameter("bias", default_init({out_channels}, fan_in));
}

Tensor Conv2d::forward(const Tensor& input) {
  return conv2d(input, weight, bias, stride, padding, dilation, groups);
}

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride_,
               int64_t padding_, int64_t dilation_, int64_t groups_, bool with_bias)
    : stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_conv("Conv1d", in_channels, out_channels, kernel_size, dilation, groups);
  const int64_t fan_in = in_channels / groups * kernel_size;
  weight = register_parameter("weight", default_init({out_channels, in_channels / groups, kernel_size}, fan_in));
  if (with_bias) bias = register_parameter("bias", default_init({out_channels}, fan_in));
}

Tensor Conv1d::forward(const Tensor& input) { return conv1d(input, weight, bias, stride, padding, dilation, groups); }

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride_,
                                 int64_t padding_, int64_t output_padding_, int64_t groups_, bool with_bias,
                                 int64_t dilation_)
    : stride(stride_), padding(padding_), output_padding(output_padding_), groups(groups_), dilation(dilation_) {
  check_conv("ConvTranspose2d", in_channels, out_channels, kernel_size, dilation, groups);
  // The weight is [in, out / groups, k, k]: PyTorch's fan_in is its dim 1 times the kernel's area.
  const int64_t fan_in = out_channels / groups * kernel_size * kernel_size;
  weight = register_parameter(
      "weight", default_init({in_channels, out_channels / groups, kernel_size, kernel_size}, fan_in));
  if (with_bias) bias = register_parameter("bias", default_init({out_channels}, fan_in));
}

Tensor ConvTranspose2d::forward(const Tensor& input) {
  return conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation);
}

PReLU::PReLU(int64_t num_parameters, double init) {
  check_positive("PReLU", "num_parameters", num_parameters);
  MemoryCategoryGuard mg(MemoryCategory::parameters);
  weight = register_parameter("weight", Tensor::full({num_parameters}, init));
}

Dropout::Dropout(double p_) : p(p_) {
  if (!(p >= 0.0 && p < 1.0))
    throw Error(Status::invalid_argument("Dropout: p must be in [0, 1), got " + std::to_string(p)));
}

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p, is_training()); }

Embedding::Embedding(int64_t num_embeddings, int64_t dim) {
  if (num_embeddings < 1 || dim < 1)
    throw Error(Status::invalid_argument("Embedding: num_embeddings " + std::to_string(num_embeddings) +
                                         " and dim " + std::to_string(dim) + " must be >= 1"));
  MemoryCategoryGuard mg(MemoryCategory::parameters);
  weight = register_parameter("weight", Tensor::normal({num_embeddings, dim}, 0.0, 1.0));
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(indices, weight); }

}  // namespace mixprec::nn
