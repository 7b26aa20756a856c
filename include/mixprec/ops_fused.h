// ops_fused.h: fused ops of our own, for the hot spots oneDNN 2.6 leaves slow on this CPU.
// Same contract as ops.h: autograd is recorded when the input requires grad, dtypes follow
// the autocast policy table, errors throw mixprec::Error naming the op and the shapes.
#pragma once
#include <cstdint>

#include "mixprec/tensor.h"

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

}  // namespace mixprec
