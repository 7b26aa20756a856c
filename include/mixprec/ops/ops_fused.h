// ops_fused.h: fused ops of our own, for the hot spots oneDNN 2.6 leaves slow on this CPU.
// Same contract as ops.h: autograd is recorded when the input requires grad, dtypes follow
// the autocast policy table, errors throw mixprec::Error naming the op and the shapes.
#pragma once
#include <cstdint>
#include <optional>

#include "mixprec/core/tensor.h"

namespace mixprec {

// max_pool2d(relu(src), kernel) in one pass (kernel == stride, no padding, floor mode),
// with the same values and gradient as the composition: ties go to the first maximum in
// the window (PyTorch), and a window whose maximum is <= 0 outputs 0 and passes no
// gradient back (relu's gradient is 0 at x <= 0). src [N, C, H, W] -> [N, C, H/k, W/k],
// same dtype and memory format (NHWC stays NHWC). Autocast policy: keep (max_pool2d's
// entry). f32/bf16/f16 run the fused kernel (backend/cpu/relu_max_pool.h: a 4-bit argmax
// per output for kernels up to 3, 1 byte up to 15); f64 and larger kernels run the
// composition. NaN propagates as in PyTorch: the first NaN of a window is its output and
// receives the window's gradient.
Tensor relu_max_pool2d(const Tensor& src, int64_t kernel);

// relu_max_pool2d(conv2d(src, weights, bias, stride, padding), pool): a convolution block
// in one call. Values, gradients and autocast (conv2d's lower policy, then keep) are the
// composition's. For the first layer of a CNN on images (src needs no gradient, 1-3 input
// channels, 3x3 kernel, stride 1, padding 1, pool 2, 16-64 output channels in multiples of
// 16, f32/bf16/f16, AVX-512) it runs one fused kernel (backend/cpu/conv_relu_pool.h) that
// never stores the full-resolution convolution output or its gradient; the convolution then
// sums in its own order (agrees with oneDNN's to f32 rounding, not bit for bit). Every
// other case runs the composition. Sequential fuses Conv2d, ReLU, MaxPool2d(k) runs into it.
Tensor conv2d_relu_max_pool2d(const Tensor& src, const Tensor& weights, const Tensor& bias, int64_t stride,
                              int64_t padding, int64_t pool);

// The residual stream's add and the LayerNorm that reads it, in one pass: sum = x + branch,
// normed = layer_norm(sum, normalized_shape, weight, bias, eps), then rounded to
// normed_dtype when given (a cast of layer_norm's output, done as it is written: the models
// pass the dtype their next GEMM's autocast row casts to, so under autocast no separate
// bf16 pass runs). branch may be undefined (sum is x, no add). Autocast: layer_norm's row
// (fp32) applied to x, weight, bias and the branch; a branch the row would widen (bf16 to
// f32) is read as it is and widened exactly in the kernel, the values add's promote cast
// would give; sum's dtype is the two's common dtype. Values and gradients are the
// composition's (add, layer_norm, cast), bit for bit on f32 sums; the backward adds sum's
// own gradient to the norm's input gradient and rounds the branch's share in the same pass.
// Shapes: branch as x; weight/bias as normalized_shape (or undefined: no affine).
struct ResidualLayerNorm {
  Tensor sum;     // the stream: x + branch (x itself without a branch)
  Tensor normed;  // layer_norm(sum), in normed_dtype (default: sum's dtype)
};
ResidualLayerNorm add_layer_norm(const Tensor& x, const Tensor& branch, const Shape& normalized_shape,
                                 const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                                 std::optional<DType> normed_dtype = std::nullopt);

}  // namespace mixprec
