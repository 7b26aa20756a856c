// conv3d.cpp: F.conv3d (its own row of the autocast table: lower, as PyTorch 1.13's CPU
// autocast), forward and backward, as one conv2d.
//
// A 3-D convolution is a 2-D one whose input channels are (channel, depth tap) pairs:
//   out[n, o, od] = sum_{c, kd} conv2d(x[n, c, od * stride - padding + kd * dilation], w[o, c, kd])
// so with X'[n * OD + od, c * KD + kd] = x[n, c, od * stride - padding + kd * dilation] (zeros outside)
// and W' = w reshaped to [O, C * KD, KH, KW] (a plain reshape: kd is w's next dim after c),
// conv3d(x, w) = conv2d(X', W') reordered to [N, O, OD, OH, OW]. Each output element is one
// kernel sum rounded once, as a native 3-D kernel gives; X' is built from differentiable
// copies (cat with zero planes, narrow, stack, transpose), so backward is theirs and
// conv2d's. The price is memory: X' holds each input plane KD / stride times.
#include "mixprec/ops/ops.h"
#include "ops/autocast_hook.h"
#include "ops/conv_common.h"

namespace mixprec {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::invalid_argument(msg)); }

}  // namespace

Tensor conv3d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv3d, {input_in, weight_in, bias_in});
  const Tensor &input = in[0], &weight = in[1], &bias = in[2];
  if (!input.defined() || !weight.defined() || (input.dim() != 4 && input.dim() != 5) || weight.dim() != 5)
    fail("conv3d: expected input [N, C, D, H, W] or [C, D, H, W] and weight [O, C / groups, KD, KH, KW], got " +
         (input.defined() ? shape_str(input.shape()) : std::string("undefined")) + " and " +
         (weight.defined() ? shape_str(weight.shape()) : std::string("undefined")));
  const bool batched = input.dim() == 5;
  const int64_t N = batched ? input.size(0) : 1;
  const int64_t C = input.size(-4), D = input.size(-3), H = input.size(-2), W = input.size(-1);
  const int64_t O = weight.size(0), CG = weight.size(1), KD = weight.size(2), KH = weight.size(3), KW = weight.size(4);
  ops_detail::check_conv_params("conv3d", stride, padding, dilation, groups);
  ops_detail::check_groups("conv3d", C, input.shape(), weight.shape(), groups, /*transposed=*/false);
  if (input.dtype() != weight.dtype())
    fail("conv3d: dtype mismatch: input " + input.str() + ", weight " + weight.str() + " (cast one, or use autocast)");
  if (dilation * (KD - 1) + 1 > D + 2 * padding)
    fail("conv3d: kernel " + shape_str(weight.shape()) + (dilation > 1 ? " dilated by " + std::to_string(dilation) : "") +
         " is larger than the padded input " + shape_str(input.shape()));
  const int64_t OD = (D + 2 * padding - dilation * (KD - 1) - 1) / stride + 1;
  ops_detail::AutocastOff inside;  // conv3d's row is applied; the copies and conv2d must not apply theirs
  // Depth first, zero planes either side: xt [D + 2 padding, C, N, H, W].
  Tensor xt = transpose(reshape(input, {N, C, D, H, W}), 0, 2);
  if (padding > 0) {
    const Tensor zeros = Tensor::zeros({padding, C, N, H, W}, input.dtype());
    xt = cat({zeros, xt, zeros}, 0);
  }
  // [OD, KD, C, N, H, W]: output depth od reads planes od * stride + kd * dilation (one
  // window of KD planes without dilation).
  std::vector<Tensor> windows;
  windows.reserve(size_t(OD));
  for (int64_t od = 0; od < OD; ++od) {
    if (dilation == 1) {
      windows.push_back(narrow(xt, od * stride, KD));
      continue;
    }
    std::vector<Tensor> taps;
    for (int64_t kd = 0; kd < KD; ++kd) taps.push_back(narrow(xt, od * stride + kd * dilation, 1));
    windows.push_back(cat(taps, 0));
  }
  Tensor cols = stack(windows, 0);
  cols = transpose(transpose(cols, 0, 3), 1, 3);  // [N, OD, C, KD, H, W]
  // Groups carry over: X''s channels c * KD + kd keep each group's channels together, and
  // the weight [O, C / groups, KD, KH, KW] reads as [O, (C / groups) KD, KH, KW].
  const Tensor out2d = ops_detail::conv2d_with_params(
      "conv3d", reshape(cols, {N * OD, C * KD, H, W}), reshape(weight, {O, CG * KD, KH, KW}), bias,
      {stride, stride, padding, padding, dilation, dilation, groups});
  // [N * OD, O, OH, OW] -> [N, O, OD, OH, OW]
  const Tensor out = transpose(reshape(out2d, {N, OD, O, out2d.size(2), out2d.size(3)}), 1, 2);
  return batched ? out : reshape(out, {O, OD, out.size(3), out.size(4)});
}

}  // namespace mixprec
