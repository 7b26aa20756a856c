// conv_transpose.cpp: conv_transpose2d and conv_transpose1d (F.conv_transpose*d), each with
// its own row of the autocast table (lower, as PyTorch 2's CPU autocast; 1.13 leaves them
// alone, a listed difference), forward and backward.
//
// A transposed convolution is the adjoint of a direct one: with weight [C_in, C_out / groups,
// KH, KW] (PyTorch's layout) read as a conv2d weight [O = C_in, C / groups = C_out / groups,
// KH, KW] of the same groups and dilation,
//   forward          = conv2d's backward-data  (diff_dst := input)
//   input gradient   = conv2d's forward        (src := the output's gradient)
//   weight gradient  = conv2d's backward-weights (src := the output's gradient, diff_dst := input)
// so it runs conv2d's kernels, oneDNN's and ref's, as oneDNN's own deconvolution primitive
// does; each output element is one kernel sum, rounded once. The bias is added after (one
// more rounding in 16 bits; its gradient is add's broadcast sum). The float64 reference the
// op harness checks against is backend/ref's direct scatter loop (conv_transpose2d_reference),
// written from PyTorch's definition, not from these kernels.
// conv_transpose1d is conv_transpose2d of unit height, exact.
#include <algorithm>

#include "autograd/node.h"
#include "mixprec/ops/ops.h"
#include "ops/autocast_hook.h"
#include "ops/conv_common.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::invalid_argument(msg)); }

// input [N, C_in, H, W], weight [C_in, C_out / groups, KH, KW]; per-axis stride, padding,
// dilation and groups (the conv2d parameters the adjoint uses) and output padding (the extra
// rows and columns).
Tensor conv_transpose2d_with_params(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                                    const Conv2dParams& p, int64_t out_pad_h, int64_t out_pad_w) {
  if (input.dim() != 4 || weight.dim() != 4)
    fail(std::string(op) + ": input " + shape_str(input.shape()) + " and weight " + shape_str(weight.shape()) +
         " do not fit (expected input [N, C_in, H, W], weight [C_in, C_out / groups, KH, KW])");
  ops_detail::check_groups(op, input.size(1), input.shape(), weight.shape(), p.groups, /*transposed=*/true);
  const int64_t C_out = weight.size(1) * p.groups;
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != C_out))
    fail(std::string(op) + ": bias " + shape_str(bias.shape()) + " does not match weight " +
         shape_str(weight.shape()) + " (expected [" + std::to_string(C_out) + "])");
  if (input.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != input.dtype()))
    fail(std::string(op) + ": dtype mismatch: input " + input.str() + ", weight " + weight.str() +
         (bias.defined() ? ", bias " + bias.str() : "") + " (cast one, or use autocast)");
  // PyTorch's rule, per axis: the extra rows must be fewer than the stride or the dilation,
  // so that the output still maps back onto exactly the input's size.
  const Axes2 out_pad{out_pad_h, out_pad_w}, stride{p.stride_h, p.stride_w}, dilation{p.dil_h, p.dil_w};
  for (size_t axis = 0; axis < 2; ++axis) {
    const std::string where = " along " + std::string(ops_detail::axis_name(axis)) + ", output_padding " +
                              ops_detail::axes_str(out_pad);
    if (out_pad[axis] < 0) fail(std::string(op) + ": output_padding must be >= 0, got " + std::to_string(out_pad[axis]) + where);
    if (out_pad[axis] >= std::max(stride[axis], dilation[axis]))
      fail(std::string(op) + ": output_padding must be smaller than the stride or the dilation, got " +
           std::to_string(out_pad[axis]) + where + " with stride " + ops_detail::axes_str(stride) + " and dilation " +
           ops_detail::axes_str(dilation));
  }
  const int64_t N = input.size(0), H = input.size(2), W = input.size(3);
  const int64_t OH = (H - 1) * p.stride_h - 2 * p.pad_h + p.dil_h * (weight.size(2) - 1) + out_pad_h + 1;
  const int64_t OW = (W - 1) * p.stride_w - 2 * p.pad_w + p.dil_w * (weight.size(3) - 1) + out_pad_w + 1;
  if (OH < 1 || OW < 1)
    fail(std::string(op) + ": input " + shape_str(input.shape()) + " with weight " + shape_str(weight.shape()) +
         " gives an output of " + std::to_string(OH) + "x" + std::to_string(OW) + " (too much padding)");
  // The kernels see conv2d's geometry, where an output of OH rows maps back onto H input rows
  // only while the extra rows are fewer than the stride. Extra rows past that (dilation >
  // stride) are never written by any tap: they are added as zeros after the kernel.
  const int64_t kern_pad_h = std::min(out_pad_h, p.stride_h - 1), kern_pad_w = std::min(out_pad_w, p.stride_w - 1);
  const Shape out_shape{N, C_out, OH - (out_pad_h - kern_pad_h), OW - (out_pad_w - kern_pad_w)};
  Tensor dst = ops_detail::dispatch(
      "conv_transpose2d", input.dtype(),
      [&] { return onednn::conv2d_backward_data(input, weight, out_shape, p); },
      [&] { return ref::conv2d_backward_data(input, weight, out_shape, p); });
  if (any_requires_grad({&input, &weight})) {
    Tensor x = weight.requires_grad() ? input.detach() : Tensor();
    Tensor w = input.requires_grad() ? weight.detach() : Tensor();
    const Shape w_shape = weight.shape();
    record_op(dst, "conv_transpose2d", {&input, &weight}, [x, w, w_shape, p](const Tensor& diff_dst) {
      std::vector<Tensor> g(2);
      const DType dt = diff_dst.dtype();
      if (w.defined())
        g[0] = ops_detail::dispatch(
            "conv_transpose2d_backward_data", dt, [&] { return onednn::conv2d_forward(diff_dst, w, Tensor(), p); },
            [&] { return ref::conv2d_forward(diff_dst, w, Tensor(), p); });
      if (x.defined()) {
        MemoryCategoryGuard mg(MemoryCategory::gradients);  // weight gradients
        // f32 for 16-bit inputs, as conv2d's (the engine rounds them for a 16-bit weight).
        g[1] = ops_detail::conv2d_weight_grads(diff_dst, x, w_shape, false, p).diff_weights;
      }
      return g;
    });
  }
  ops_detail::AutocastOff inside;  // the op's row is applied; cat, add and reshape must not apply theirs
  auto zero_rows = [&](int64_t dim, int64_t count) {
    Shape zs = dst.shape();
    zs[size_t(dim)] = count;
    dst = cat({dst, Tensor::zeros(zs, dst.dtype())}, dim);
  };
  if (out_pad_h > kern_pad_h) zero_rows(2, out_pad_h - kern_pad_h);
  if (out_pad_w > kern_pad_w) zero_rows(3, out_pad_w - kern_pad_w);
  if (!bias.defined()) return dst;
  return add(dst, reshape(bias, {1, C_out, 1, 1}));
}

}  // namespace

Tensor conv_transpose2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Axes2 stride,
                        Axes2 padding, Axes2 output_padding, int64_t groups, Axes2 dilation) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv_transpose2d, {input_in, weight_in, bias_in});
  const Tensor &input = in[0], &weight = in[1], &bias = in[2];
  if (!input.defined() || !weight.defined() || (input.dim() != 3 && input.dim() != 4))
    fail("conv_transpose2d: expected input [N, C_in, H, W] or [C_in, H, W], got " +
         (input.defined() ? shape_str(input.shape()) : std::string("undefined")));
  ops_detail::check_conv_params("conv_transpose2d", stride, padding, dilation, groups);
  const Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  if (input.dim() == 4)
    return conv_transpose2d_with_params("conv_transpose2d", input, weight, bias, p, output_padding[0],
                                        output_padding[1]);
  ops_detail::AutocastOff inside;  // unbatched: as a batch of one
  const Tensor out =
      conv_transpose2d_with_params("conv_transpose2d", reshape(input, {1, input.size(0), input.size(1), input.size(2)}),
                                   weight, bias, p, output_padding[0], output_padding[1]);
  return reshape(out, {out.size(1), out.size(2), out.size(3)});
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
                        int64_t output_padding, int64_t groups, int64_t dilation) {
  return conv_transpose2d(input, weight, bias, Axes2{stride, stride}, Axes2{padding, padding},
                          Axes2{output_padding, output_padding}, groups, Axes2{dilation, dilation});
}

Tensor conv_transpose1d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv_transpose1d, {input_in, weight_in, bias_in});
  const Tensor &input = in[0], &weight = in[1], &bias = in[2];
  if (!input.defined() || !weight.defined() || (input.dim() != 2 && input.dim() != 3) || weight.dim() != 3)
    fail("conv_transpose1d: expected input [N, C_in, L] or [C_in, L] and weight [C_in, C_out / groups, K], got " +
         (input.defined() ? shape_str(input.shape()) : std::string("undefined")) + " and " +
         (weight.defined() ? shape_str(weight.shape()) : std::string("undefined")));
  ops_detail::check_conv_params("conv_transpose1d", stride, padding, dilation, groups);
  const bool batched = input.dim() == 3;
  const int64_t N = batched ? input.size(0) : 1, C = input.size(-2), L = input.size(-1);
  ops_detail::check_groups("conv_transpose1d", C, input.shape(), weight.shape(), groups, /*transposed=*/true);
  ops_detail::AutocastOff inside;  // conv_transpose1d's row is applied; the reshapes must not apply theirs
  const Tensor out = conv_transpose2d_with_params(
      "conv_transpose1d", reshape(input, {N, C, 1, L}), reshape(weight, {weight.size(0), weight.size(1), 1, weight.size(2)}),
      bias, {1, stride, 0, padding, 1, dilation, groups}, 0, output_padding);
  const int64_t O = out.size(1), OL = out.size(3);
  return batched ? reshape(out, {N, O, OL}) : reshape(out, {O, OL});
}

}  // namespace mixprec
