// conv_common.h: what the convolution ops share inside src/ops. conv2d, conv1d (a conv2d of
// unit height), conv3d (a conv2d over channel x depth tap) and the transposed convolutions
// (conv2d's kernels with forward and backward-data swapped) all run conv2d's kernels; only
// conv2d's own file holds the kernel calls and backward of a direct convolution. The
// argument rules are PyTorch 1.13's, written once here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "backend/kernel_params.h"
#include "backend/kernels.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"
#include "mixprec/ops/ops.h"

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

// PyTorch's rule for one value of a convolution's argument `name`: the message part naming
// what is wrong, or empty (stride >= 1, padding >= 0, dilation >= 1, groups >= 1).
inline std::string conv_value_error(const char* name, int64_t value) {
  const int64_t least = std::string(name) == "padding" ? 0 : 1;
  if (value >= least) return std::string();
  return std::string(name) + " " + std::to_string(value) + " (expected >= " + std::to_string(least) + ")";
}

// PyTorch's rules for a convolution's scalar arguments (one axis; the messages name the op).
inline void check_conv_params(const char* op, int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
  for (const auto& [name, value] : {std::pair{"stride", stride}, {"padding", padding}, {"dilation", dilation},
                                    {"groups", groups}}) {
    const std::string bad = conv_value_error(name, value);
    if (!bad.empty()) throw Error(Status::invalid_argument(std::string(op) + ": " + bad));
  }
}

inline std::string axes_str(const Axes2& a) {
  return "(" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ")";
}
inline const char* axis_name(size_t axis) { return axis == 0 ? "H" : "W"; }

// The same rules per axis of a 2-D op's pairs; a bad value is named with its axis and its
// pair: "conv2d: padding -1 (expected >= 0) along W, padding (0, -1)".
inline void check_conv_params(const char* op, const Axes2& stride, const Axes2& padding, const Axes2& dilation,
                              int64_t groups) {
  for (const auto& [name, pair] : {std::pair{"stride", stride}, {"padding", padding}, {"dilation", dilation}})
    for (size_t axis = 0; axis < 2; ++axis) {
      const std::string bad = conv_value_error(name, pair[axis]);
      if (!bad.empty())
        throw Error(Status::invalid_argument(std::string(op) + ": " + bad + " along " + axis_name(axis) + ", " +
                                             name + " " + axes_str(pair)));
    }
  check_conv_params(op, 1, 0, 1, groups);
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
