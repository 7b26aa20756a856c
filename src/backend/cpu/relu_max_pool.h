// backend/cpu/relu_max_pool.h: fused ReLU + max pooling (kernel == stride, no padding,
// floor mode), forward and backward. Our own kernel, not oneDNN's: in bf16, oneDNN's
// separate relu and pooling cost as much as every convolution of the seed CNN
// (limits.md §2.2); fused, the forward reads the input once and writes the output plus a
// small argmax, and the backward reads diff_dst + argmax and writes diff_src once.
//
// Semantics: exactly relu() followed by max_pool2d() (PyTorch's rules):
// - dst = max over the window of max(x, 0); argmax = the first window position (row-major,
//   0..k*k-1) holding the maximum, so ties go to the first maximum as in PyTorch.
// - A window whose maximum is <= 0 outputs +0 with "no argmax": relu's gradient is 0 at
//   x <= 0, so the composition sends nothing back through such a window.
// - NaN propagates as in PyTorch: the first NaN of a window is its output, and its argmax.
// - Floor mode: an odd H or W drops the last row / column, whose gradient is 0.
// Layouts: dense NCHW or NHWC in; dst comes out in the same format, diff_src too.
// DTypes: f32, bf16, f16 (compared in f32; the stored maximum is one of the inputs, exact).
//
// Argmax storage (the backward's saved state; its size is part of the activation peak):
// - Packed, kernel*kernel < 15 (k = 1, 2, 3): 4 bits per output. argmax is a 1-D u8 tensor
//   [ceil(dst.numel() / 2)]. Element i of dst, counted in dst's memory order (`format`:
//   NCHW or NHWC, dense), lives in byte i / 2: the low nibble for even i, the high nibble
//   for odd i. kNoArgmaxPacked (15) means no argmax; so does the unused high nibble of the
//   last byte when dst.numel() is odd.
// - Byte, k = 4..15: one byte per output, kNoArgmax (255) for none. argmax is u8 with dst's
//   shape and memory format.
// The backward tells the two apart from the kernel (argmax_is_packed).
#pragma once
#include <cstdint>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

inline constexpr uint8_t kNoArgmax = 255;
inline constexpr uint8_t kNoArgmaxPacked = 15;

// Window positions 0..k*k-1 plus the "none" code must fit 4 bits.
constexpr bool argmax_is_packed(int64_t kernel) { return kernel * kernel < 15; }

struct ReluMaxPoolResult {
  Tensor dst;     // [N, C, H/k, W/k], src's dtype and memory format
  Tensor argmax;  // u8: packed [ceil(numel / 2)] or byte [N, C, H/k, W/k] (see above)
  MemoryFormat format = MemoryFormat::contiguous;  // dst's memory order, which argmax follows
};

// src: 4-D, f32/bf16/f16; kernel in 1..15 (k*k window positions must fit a byte below 255).
ReluMaxPoolResult relu_max_pool2d_forward(const Tensor& src, int64_t kernel);

// diff_dst: dst's shape and dtype (any layout; brought to `format`); argmax and format as
// the forward returned them. Returns diff_src with shape src_shape in memory format `format`.
Tensor relu_max_pool2d_backward(const Tensor& diff_dst, const Tensor& argmax,
                                const Shape& src_shape, int64_t kernel, MemoryFormat format);

}  // namespace mixprec::backend::cpu
