// conv_common.h: what the convolution ops share inside src/ops. conv2d, conv1d (a conv2d of
// unit height), conv3d (a conv2d over channel x depth tap) and the transposed convolutions
// (conv2d's kernels with forward and backward-data swapped) all run conv2d's kernels; only
// conv2d's own file holds the kernel calls and backward of a direct convolution. The
// argument rules are PyTorch 1.13's, written once here.
#pragma once
#include <cstdint>
#include <string>

#include "backend/kernel_params.h"
#include "backend/kernels.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::ops_detail {

// A direct 2-D convolution with per-axis stride and padding on inputs the caller's row has
// already cast: shape and dtype checks, the kernel, the backward closure. `op` names the
// public op in error messages.
Tensor conv2d_with_params(const char* op, const Tensor& src, const Tensor& weights, const Tensor& bias,
                          const backend::Conv2dParams& p);

// A direct 2-D convolution's weight and bias gradients (f32 for 16-bit inputs), the one route
// every convolution's backward takes: backend/cpu's 3x3 kernel where it applies (bf16 on
// AVX512-BF16: backend/cpu/conv3x3_weight_grad.h), else oneDNN, else ref.
backend::WeightGrads conv2d_weight_grads(const Tensor& src, const Tensor& diff_dst, const Shape& weights_shape,
                                         bool with_bias, const backend::Conv2dParams& p);

// PyTorch's rules for a convolution's scalar arguments (one axis; the messages name the op):
// stride >= 1, padding >= 0, dilation >= 1, groups >= 1.
inline void check_conv_params(const char* op, int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
  std::string bad;
  if (stride < 1) bad = "stride " + std::to_string(stride) + " (expected >= 1)";
  else if (padding < 0) bad = "padding " + std::to_string(padding) + " (expected >= 0)";
  else if (dilation < 1) bad = "dilation " + std::to_string(dilation) + " (expected >= 1)";
  else if (groups < 1) bad = "groups " + std::to_string(groups) + " (expected >= 1)";
  if (!bad.empty()) throw Error(Status::invalid_argument(std::string(op) + ": " + bad));
}

// PyTorch's channel rules for groups: a direct convolution's weight is [O, C / groups, ...]
// with O divisible by groups; a transposed one's is [C, C_out / groups, ...] with C divisible
// by groups. `in_channels` is the input's C (its dim 1, or dim 0 unbatched).
inline void check_groups(const char* op, int64_t in_channels, const Shape& input, const Shape& weight, int64_t groups,
                         bool transposed) {
  const std::string given = std::string(op) + ": input " + shape_str(input) + ", weight " + shape_str(weight) +
                            (groups > 1 ? " and groups " + std::to_string(groups) : std::string()) + ": ";
  if (weight.empty() || weight[0] % groups != 0)
    throw Error(Status::invalid_argument(given + (transposed ? "input" : "output") + " channels " +
                                         (weight.empty() ? std::string("?") : std::to_string(weight[0])) +
                                         " are not divisible by the groups"));
  const int64_t expected = transposed ? weight[0] : weight[1] * groups;
  if (in_channels != expected)
    throw Error(Status::invalid_argument(given + "the weight expects " + std::to_string(expected) +
                                         " input channels, the input has " + std::to_string(in_channels)));
}
}  // namespace mixprec::ops_detail
