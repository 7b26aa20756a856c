// conv_transpose3d.cpp: F.conv_transpose3d (its own row of the autocast table: lower, as
// PyTorch 2's CPU autocast; 1.13 leaves it alone, a listed difference), forward and backward,
// as one conv_transpose2d, the adjoint of conv3d's decomposition (ops/conv3d.cpp).
//
// Output plane t (of the padded full output) gathers, for each depth tap kd, the input plane d
// with d * stride + kd * dilation = t + padding, or nothing where no such d exists:
//   out[n, :, t] = sum_{ci, kd} conv_transpose2d(x[n, ci, d(t, kd)], w[ci, :, kd])
// so with X''[n * OD + t, ci * KD + kd] = x[n, ci, d(t, kd)] (a zero plane where none) and
// W'' = w with kd moved next to ci, [C_in * KD, C_out / groups, KH, KW],
// conv_transpose3d(x, w) = conv_transpose2d(X'', W'') reordered to [N, C_out, OD, OH, OW]:
// each output element one kernel sum, rounded once; groups carry over (X''s channels keep each
// group's together). X'' is built from differentiable copies (narrow, cat, transpose), so
// backward is theirs and conv_transpose2d's. The price: X'' holds OD * KD planes, about
// stride * KD times the input, most of them zeros for stride > 1.
#include <algorithm>

#include "mixprec/ops/ops.h"
#include "ops/autocast_hook.h"
#include "ops/conv_common.h"

namespace mixprec {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::invalid_argument(msg)); }

}  // namespace

Tensor conv_transpose3d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv_transpose3d, {input_in, weight_in, bias_in});
  const Tensor &input = in[0], &weight = in[1], &bias = in[2];
  if (!input.defined() || !weight.defined() || (input.dim() != 4 && input.dim() != 5) || weight.dim() != 5)
    fail("conv_transpose3d: expected input [N, C_in, D, H, W] or [C_in, D, H, W] and weight [C_in, C_out / groups, KD, "
         "KH, KW], got " +
         (input.defined() ? shape_str(input.shape()) : std::string("undefined")) + " and " +
         (weight.defined() ? shape_str(weight.shape()) : std::string("undefined")));
  const bool batched = input.dim() == 5;
  const int64_t N = batched ? input.size(0) : 1;
  const int64_t C = input.size(-4), D = input.size(-3), H = input.size(-2), W = input.size(-1);
  const int64_t COG = weight.size(1), KD = weight.size(2), KH = weight.size(3), KW = weight.size(4);
  ops_detail::check_conv_params("conv_transpose3d", stride, padding, dilation, groups);
  ops_detail::check_groups("conv_transpose3d", C, input.shape(), weight.shape(), groups, /*transposed=*/true);
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != COG * groups))
    fail("conv_transpose3d: bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()) +
         " (expected [" + std::to_string(COG * groups) + "])");
  if (input.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != input.dtype()))
    fail("conv_transpose3d: dtype mismatch: input " + input.str() + ", weight " + weight.str() +
         (bias.defined() ? ", bias " + bias.str() : "") + " (cast one, or use autocast)");
  if (output_padding < 0 || output_padding >= std::max(stride, dilation))
    fail("conv_transpose3d: output_padding must be >= 0 and smaller than the stride or the dilation, got output_padding " +
         std::to_string(output_padding) + " with stride " + std::to_string(stride) + " and dilation " +
         std::to_string(dilation));
  auto out_size = [&](int64_t in_size, int64_t k) {
    return (in_size - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1;
  };
  const int64_t OD = out_size(D, KD), OH = out_size(H, KH), OW = out_size(W, KW);
  if (OD < 1 || OH < 1 || OW < 1)
    fail("conv_transpose3d: input " + shape_str(input.shape()) + " with weight " + shape_str(weight.shape()) +
         " gives an output of " + std::to_string(OD) + "x" + std::to_string(OH) + "x" + std::to_string(OW) +
         " (too much padding)");
  ops_detail::AutocastOff inside;  // conv_transpose3d's row is applied; the copies and conv_transpose2d must not apply theirs
  // Depth first: xt [D, C, N, H, W]; X'' as [OD * KD, C, N, H, W], plane (t, kd).
  const Tensor xt = transpose(reshape(input, {N, C, D, H, W}), 0, 2);
  const Tensor zero = Tensor::zeros({1, C, N, H, W}, input.dtype());
  std::vector<Tensor> planes;
  planes.reserve(size_t(OD * KD));
  for (int64_t t = 0; t < OD; ++t)
    for (int64_t kd = 0; kd < KD; ++kd) {
      const int64_t r = t + padding - kd * dilation;
      const bool hit = r >= 0 && r % stride == 0 && r / stride < D;
      planes.push_back(hit ? narrow(xt, r / stride, 1) : zero);
    }
  Tensor cols = reshape(cat(planes, 0), {OD, KD, C, N, H, W});
  cols = transpose(transpose(cols, 0, 3), 1, 3);  // [N, OD, C, KD, H, W]
  const Tensor w2 = reshape(transpose(weight, 1, 2), {C * KD, COG, KH, KW});  // [C_in, KD, C_out / groups, ...]
  // H and W: conv_transpose2d's own geometry, with the same output_padding (it needs it below
  // max(stride, dilation), checked above).
  const Tensor out2d = conv_transpose2d(reshape(cols, {N * OD, C * KD, H, W}), w2, bias, stride, padding,
                                        output_padding, groups, dilation);
  // [N * OD, C_out, OH, OW] -> [N, C_out, OD, OH, OW]
  const int64_t CO = COG * groups;
  const Tensor out = transpose(reshape(out2d, {N, OD, CO, OH, OW}), 1, 2);
  return batched ? out : reshape(out, {CO, OD, OH, OW});
}

}  // namespace mixprec
