// prelu.cpp: F.prelu (its own row of the autocast table: lower, as PyTorch 2's CPU autocast;
// 1.13 leaves it alone, a listed difference), forward and backward.
//
// prelu(x) = x for x > 0, weight * x otherwise, with one weight or one per channel (dim 1).
// Composed as relu(x) + weight * (x - relu(x)), which is exact: x - relu(x) is x or 0, and
// one of the two terms of the sum is 0, so the only rounding is weight * x's, as in a
// dedicated kernel. Its gradients are PyTorch's, x = 0 included (there d/dx = weight, as
// PyTorch's x > 0 test gives): 1 + weight * (1 - 1) above 0, 0 + weight * (1 - 0) at and
// below. The weight's gradient, sum(g * min(x, 0)) over all but the channel dim, is mul's
// broadcast reduction.
#include "mixprec/ops/ops.h"
#include "ops/autocast_hook.h"

namespace mixprec {

Tensor prelu(const Tensor& input_in, const Tensor& weight_in) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::prelu, {input_in, weight_in});
  const Tensor &x = in[0], &weight = in[1];
  if (!x.defined() || !weight.defined() || !is_floating(x.dtype()) || !is_floating(weight.dtype()))
    throw Error(Status::invalid_argument("prelu: needs floating input and weight, got " +
                                         (x.defined() ? x.str() : std::string("undefined")) + " and " +
                                         (weight.defined() ? weight.str() : std::string("undefined"))));
  if (weight.dim() > 1)
    throw Error(Status::invalid_argument("prelu: expected weight to be a scalar or 1-D, got " + weight.str()));
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  if (weight.numel() != 1 && weight.numel() != channels)
    throw Error(Status::invalid_argument(
        "prelu: " + std::to_string(weight.numel()) + " weights for input " + shape_str(x.shape()) +
        " (expected 1, or one per channel: " + std::to_string(channels) + ")"));
  ops_detail::AutocastOff inside;
  // The weight in the input's dtype, as PyTorch (a bf16 input with an f32 weight gives bf16),
  // shaped to broadcast over dim 1 (or everything, for a single weight).
  Shape wshape(size_t(x.dim()), 1);
  if (weight.numel() != 1) wshape[1] = channels;
  const Tensor w = reshape(weight.dtype() == x.dtype() ? weight : cast(weight, x.dtype()), wshape);
  const Tensor positive = relu(x);
  return add(positive, mul(w, sub(x, positive)));
}

}  // namespace mixprec
