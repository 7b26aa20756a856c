// fused_relu_pool.cpp: relu_max_pool2d (keep policy), forward and backward through the
// fused CPU kernel (backend/cpu/relu_max_pool.h). Backward keeps only the argmax (4 bits
// per output for k <= 3, else 1 byte): neither relu's output nor the pooling input stays
// alive for it. And conv2d_relu_max_pool2d: the same after a convolution, fused with it for
// a CNN's first layer (backend/cpu/conv_relu_pool.h), else the composition.
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "ops/conv_common.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"
#include "ops/dispatch.h"

namespace mixprec {

namespace {
bool fused_dtype(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

// The first-layer kernel (backend/cpu/conv_relu_pool.h) on inputs it applies to, with its
// backward (weights and bias only: the images need no gradient).
Tensor fused_conv_relu_max_pool(const Tensor& src, const Tensor& weights, const Tensor& bias) {
  backend::cpu::ConvReluPoolResult r = backend::cpu::conv_relu_max_pool_forward(src, weights, bias);
  if (any_requires_grad({&weights, &bias})) {
    record_op(r.dst, "conv2d_relu_max_pool2d", {&src, &weights, &bias},
              [s = src.detach(), arg = r.argmax, finite = r.src_finite, w_shape = weights.shape(),
               with_bias = bias.defined()](const Tensor& diff_dst) {
                const DType dt = diff_dst.dtype();
                if (!finite) {
                  // inf/NaN in the images: the composition's backward, whose zero gradients
                  // times the non-finite inputs give the NaN PyTorch would give.
                  const Tensor d_conv = ops_detail::dispatch_cpu("relu_max_pool2d_backward", dt, [&] {
                    return backend::cpu::relu_max_pool2d_backward(
                        diff_dst, arg, {s.size(0), w_shape[0], s.size(2), s.size(3)}, 2, MemoryFormat::channels_last);
                  });
                  MemoryCategoryGuard mg(MemoryCategory::gradients);
                  const backend::Conv2dParams p{1, 1, 1, 1};
                  backend::WeightGrads wg = ops_detail::conv2d_weight_grads(s, d_conv, w_shape, with_bias, p);
                  return std::vector<Tensor>{Tensor(), wg.diff_weights, wg.diff_bias};
                }
                MemoryCategoryGuard mg(MemoryCategory::gradients);  // weight gradients
                backend::cpu::ConvReluPoolGrads g = ops_detail::dispatch_cpu("conv2d_relu_max_pool2d_backward", dt, [&] {
                  return backend::cpu::conv_relu_max_pool_backward_weights(s, diff_dst, arg, w_shape, with_bias);
                });
                // f32 as accumulated, like conv2d's: an autocast copy's cast node passes them
                // to the f32 parameter unrounded.
                return std::vector<Tensor>{Tensor(), g.diff_weights, g.diff_bias};
              });
  }
  return r.dst;
}
}  // namespace

Tensor relu_max_pool2d(const Tensor& src_in, int64_t kernel) {
  // The composition's casts: relu's row, then max_pool2d's (both keep by default).
  const Tensor src =
      ops_detail::autocast_input(amp::OpId::max_pool2d, ops_detail::autocast_input(amp::OpId::relu, src_in));
  if (!src.defined() || src.dim() != 4 || !is_floating(src.dtype()))
    throw Error(Status::invalid_argument("relu_max_pool2d: expected a floating src [N, C, H, W], got " +
                                         (src.defined() ? src.str() : std::string("undefined"))));
  if (kernel < 1 || kernel > src.size(2) || kernel > src.size(3))
    throw Error(Status::invalid_argument("relu_max_pool2d: kernel " + std::to_string(kernel) +
                                         " must be >= 1 and fit src " + shape_str(src.shape())));
  // f64 (gradchecks), MIXPREC_BACKEND=ref and windows too large for a byte of argmax run
  // the composition, which is the definition this op must match.
  const bool fused = fused_dtype(src.dtype()) && ops_detail::onednn_enabled_for(src.dtype()) && kernel <= 15;
  return ops_detail::route(
      "relu_max_pool2d", src.dtype(), fused,
      [&] {
        backend::cpu::ReluMaxPoolResult r = backend::cpu::relu_max_pool2d_forward(src, kernel);
        if (any_requires_grad({&src})) {
          record_op(r.dst, "relu_max_pool2d", {&src},
                    [arg = r.argmax, format = r.format, src_shape = src.shape(), kernel](const Tensor& diff_dst) {
                      return std::vector<Tensor>{ops_detail::dispatch_cpu("relu_max_pool2d_backward", diff_dst.dtype(), [&] {
                        return backend::cpu::relu_max_pool2d_backward(diff_dst, arg, src_shape, kernel, format);
                      })};
                    });
        }
        return r.dst;
      },
      ops_detail::no_kernel,
      ops_detail::composed([&] {
        ops_detail::AutocastOff cast_already;  // src is cast as the composition casts
        return max_pool2d(relu(src), kernel);
      }));
}

Tensor conv2d_relu_max_pool2d(const Tensor& src_in, const Tensor& weights_in, const Tensor& bias_in, int64_t stride,
                              int64_t padding, int64_t pool) {
  auto composition = [&] { return relu_max_pool2d(conv2d(src_in, weights_in, bias_in, stride, padding), pool); };
  // Fused only where no input gradient is wanted (a CNN's first layer: its images), so the
  // full-resolution convolution output is never needed, forward or backward.
  if (!src_in.defined() || src_in.requires_grad()) return composition();
  const auto in = ops_detail::autocast_inputs(amp::OpId::conv2d, {src_in, weights_in, bias_in});
  const Tensor &src = in[0], &weights = in[1], &bias = in[2];
  const bool fused = ops_detail::onednn_enabled_for(src.dtype()) &&
                     backend::cpu::conv_relu_max_pool_applies(src, weights, bias, stride, padding, pool);
  return ops_detail::route(
      "conv2d_relu_max_pool2d", src.dtype(), fused, [&] { return fused_conv_relu_max_pool(src, weights, bias); },
      ops_detail::no_kernel, ops_detail::composed([&] {
        ops_detail::AutocastOff cast_already;  // the inputs are cast as conv2d casts them
        return relu_max_pool2d(conv2d(src, weights, bias, stride, padding), pool);
      }));
}

}  // namespace mixprec
