// ops_fused.h: fused ops of our own, for the hot spots oneDNN 2.6 leaves slow on this CPU.
// Same contract as ops.h: autograd is recorded when the input requires grad, dtypes follow
// the autocast policy table, errors throw mixprec::Error naming the op and the shapes.
#pragma once
#include <cstdint>

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

}  // namespace mixprec
