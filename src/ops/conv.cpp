// conv.cpp: 2-D convolution (lower policy under autocast), forward and backward.
// Backward never asks for the input gradient of a layer whose input needs none: for the
// first layer, oneDNN 2.6's f32 backward-data is a reference kernel taking seconds.
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

Tensor conv2d(const Tensor& src_in, const Tensor& weights_in, const Tensor& bias_in,
              int64_t stride, int64_t padding) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv2d, {src_in, weights_in, bias_in});
  const Tensor &src = in[0], &weights = in[1], &bias = in[2];
  if (src.dim() != 4 || weights.dim() != 4 || src.size(1) != weights.size(1))
    throw Error(Status::invalid_argument(
        "conv2d: src " + shape_str(src.shape()) + " and weights " + shape_str(weights.shape()) +
        " do not fit (expected src [N, C, H, W], weights [O, C, KH, KW] with the same C)"));
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weights.size(0)))
    throw Error(Status::invalid_argument("conv2d: bias " + shape_str(bias.shape()) +
                                         " does not match weights " + shape_str(weights.shape())));
  if (stride < 1 || padding < 0)
    throw Error(Status::invalid_argument("conv2d: stride must be >= 1 and padding >= 0, got " +
                                         std::to_string(stride) + ", " + std::to_string(padding)));
  if (src.dtype() != weights.dtype() || (bias.defined() && bias.dtype() != src.dtype()))
    throw Error(Status::invalid_argument("conv2d: dtype mismatch: src " + src.str() + ", weights " +
                                         weights.str() + (bias.defined() ? ", bias " + bias.str() : "") +
                                         " (cast one, or use autocast)"));
  const Conv2dParams p{stride, stride, padding, padding};
  if (conv_out_size(src.size(2), weights.size(2), stride, padding) < 1 ||
      conv_out_size(src.size(3), weights.size(3), stride, padding) < 1)
    throw Error(Status::invalid_argument("conv2d: kernel " + shape_str(weights.shape()) +
                                         " is larger than the padded input " + shape_str(src.shape())));
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
                  WeightGrads wg = ops_detail::dispatch(
                      "conv2d_backward_weights", dt,
                      [&] { return onednn::conv2d_backward_weights(s, diff_dst, w_shape, with_bias, p); },
                      [&] { return ref::conv2d_backward_weights(s, diff_dst, w_shape, with_bias, p); });
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

}  // namespace mixprec
