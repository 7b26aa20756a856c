// conv.cpp: 2-D convolution and conv1d (a conv2d of unit height, exact: the same sums in
// the same kernels; PyTorch computes conv1d the same way), each with its own row of the
// autocast table (lower), forward and backward; PyTorch's groups and dilation go to the
// kernels (oneDNN's and ref's take both).
// Backward never asks for the input gradient of a layer whose input needs none: for the
// first layer, oneDNN 2.6's f32 backward-data is a reference kernel taking seconds.
#include <algorithm>

#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops/ops.h"
#include "ops/conv_common.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace ops_detail {

WeightGrads conv2d_weight_grads(const Tensor& src, const Tensor& diff_dst, const Shape& weights_shape,
                                bool with_bias, const Conv2dParams& p) {
  return route(
      "conv2d_backward_weights", src.dtype(), cpu::conv3x3_weight_grad_applies(src, diff_dst, weights_shape, p),
      [&] {
        cpu::Conv3x3WeightGrads g = cpu::conv3x3_weight_grad(src, diff_dst, weights_shape, with_bias);
        return WeightGrads{g.diff_weights, g.diff_bias};
      },
      [&] { return onednn::conv2d_backward_weights(src, diff_dst, weights_shape, with_bias, p); },
      [&] { return ref::conv2d_backward_weights(src, diff_dst, weights_shape, with_bias, p); });
}

Tensor conv2d_with_params(const char* op, const Tensor& src, const Tensor& weights, const Tensor& bias,
                          const Conv2dParams& p) {
  if (src.dim() != 4 || weights.dim() != 4)
    throw Error(Status::invalid_argument(
        std::string(op) + ": src " + shape_str(src.shape()) + " and weights " + shape_str(weights.shape()) +
        " do not fit (expected src [N, C, H, W], weights [O, C / groups, KH, KW])"));
  check_conv_params(op, {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w}, {p.dil_h, p.dil_w}, p.groups);
  check_groups(op, src.size(1), src.shape(), weights.shape(), p.groups, /*transposed=*/false);
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weights.size(0)))
    throw Error(Status::invalid_argument(std::string(op) + ": bias " + shape_str(bias.shape()) +
                                         " does not match weights " + shape_str(weights.shape())));
  if (src.dtype() != weights.dtype() || (bias.defined() && bias.dtype() != src.dtype()))
    throw Error(Status::invalid_argument(std::string(op) + ": dtype mismatch: src " + src.str() + ", weights " +
                                         weights.str() + (bias.defined() ? ", bias " + bias.str() : "") +
                                         " (cast one, or use autocast)"));
  // PyTorch's rule, per axis: the dilated kernel fits in the padded input.
  const Axes2 span{p.dil_h * (weights.size(2) - 1) + 1, p.dil_w * (weights.size(3) - 1) + 1};
  const Axes2 padded{src.size(2) + 2 * p.pad_h, src.size(3) + 2 * p.pad_w};
  for (size_t axis = 0; axis < 2; ++axis)
    if (span[axis] > padded[axis])
      throw Error(Status::invalid_argument(
          std::string(op) + ": kernel " + shape_str(weights.shape()) +
          (p.dil_h > 1 || p.dil_w > 1
               ? " dilated by " + (p.dil_h == p.dil_w ? std::to_string(p.dil_h) : axes_str({p.dil_h, p.dil_w}))
               : std::string()) +
          " is larger than the padded input " + shape_str(src.shape()) + ": it spans " + std::to_string(span[axis]) +
          " along " + axis_name(axis) + ", the input padded by " + axes_str({p.pad_h, p.pad_w}) + " has " +
          std::to_string(padded[axis])));
  Tensor dst = ops_detail::dispatch(
      "conv2d", src.dtype(), [&] { return onednn::conv2d_forward(src, weights, bias, p); },
      [&] { return ref::conv2d_forward(src, weights, bias, p); });
  if (any_requires_grad({&src, &weights, &bias})) {
    const bool need_src = src.requires_grad();
    const bool need_w = weights.requires_grad() || (bias.defined() && bias.requires_grad());
    Tensor s = need_w ? src.detach() : Tensor();
    Tensor w = need_src ? weights.detach() : Tensor();
    const Shape src_shape = src.shape(), w_shape = weights.shape();
    const bool with_bias = bias.defined();
    record_op(dst, "conv2d", {&src, &weights, &bias},
              [s, w, src_shape, w_shape, with_bias, p](const Tensor& diff_dst) {
                std::vector<Tensor> g(3);
                const DType dt = diff_dst.dtype();
                if (w.defined())
                  g[0] = ops_detail::dispatch(
                      "conv2d_backward_data", dt,
                      [&] { return onednn::conv2d_backward_data(diff_dst, w, src_shape, p); },
                      [&] { return ref::conv2d_backward_data(diff_dst, w, src_shape, p); });
                if (s.defined()) {
                  MemoryCategoryGuard mg(MemoryCategory::gradients);  // weight gradients
                  WeightGrads wg = conv2d_weight_grads(s, diff_dst, w_shape, with_bias, p);
                  // f32 as oneDNN accumulated them: an autocast copy's cast node passes
                  // them to the f32 parameter unrounded; any other bf16 input gets them
                  // rounded by the engine (autograd/engine.cpp, conform).
                  g[1] = wg.diff_weights;
                  g[2] = wg.diff_bias;
                }
                return g;
              });
  }
  return dst;
}


}  // namespace ops_detail

Tensor conv2d(const Tensor& src_in, const Tensor& weights_in, const Tensor& bias_in, Axes2 stride, Axes2 padding,
              Axes2 dilation, int64_t groups) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv2d, {src_in, weights_in, bias_in});
  return ops_detail::conv2d_with_params(
      "conv2d", in[0], in[1], in[2],
      {stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups});
}

Tensor conv2d(const Tensor& src, const Tensor& weights, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  return conv2d(src, weights, bias, Axes2{stride, stride}, Axes2{padding, padding}, Axes2{dilation, dilation}, groups);
}

// input [N, C, L] (or unbatched [C, L]), weight [O, C / groups, K] -> [N, O, (L + 2 padding -
// dilation (K - 1) - 1) / stride + 1]: conv2d on [N, C, 1, L] with weight [O, C / groups, 1, K],
// stride, padding and dilation along W.
Tensor conv1d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv1d, {input_in, weight_in, bias_in});
  const Tensor &input = in[0], &weight = in[1], &bias = in[2];
  if (!input.defined() || !weight.defined() || (input.dim() != 2 && input.dim() != 3) || weight.dim() != 3)
    throw Error(Status::invalid_argument(
        "conv1d: expected input [N, C, L] or [C, L] and weight [O, C / groups, K], got " +
        (input.defined() ? shape_str(input.shape()) : std::string("undefined")) + " and " +
        (weight.defined() ? shape_str(weight.shape()) : std::string("undefined"))));
  const bool batched = input.dim() == 3;
  const int64_t N = batched ? input.size(0) : 1, C = input.size(-2), L = input.size(-1);
  ops_detail::check_conv_params("conv1d", stride, padding, dilation, groups);
  ops_detail::check_groups("conv1d", C, input.shape(), weight.shape(), groups, /*transposed=*/false);
  ops_detail::AutocastOff inside;  // conv1d's row is applied; the reshapes must not apply theirs
  const Tensor out = ops_detail::conv2d_with_params(
      "conv1d", reshape(input, {N, C, 1, L}), reshape(weight, {weight.size(0), weight.size(1), 1, weight.size(2)}), bias,
      {1, stride, 0, padding, 1, dilation, groups});
  const int64_t O = out.size(1), OL = out.size(3);
  return batched ? reshape(out, {N, O, OL}) : reshape(out, {O, OL});
}

}  // namespace mixprec
