// backend/cpu/conv_relu_pool.h: the first layer of a CNN on images, fused: a 3x3
// convolution (stride 1, padding 1) over 1-3 input channels, ReLU and 2x2 max pooling in one
// pass, and its weight gradient. Our own kernel, not oneDNN's: with 3 input channels
// oneDNN 2.6's convolution runs at a fraction of its rate (seed CNN on Zen5: forward 141
// GFLOP/s, backward-weights 76 GFLOP/s in f32, against 400-900 for the next layer), and
// the composition writes the full-resolution convolution output (33.5 MB per step in f32)
// only to read it back for the pooling, then writes its full-resolution gradient only for
// the weight gradient to read it. Fused, the forward writes the pooled output and a 4-bit
// argmax; the backward reads the pooled gradient and the argmax and never builds the
// full-resolution one.
//
// Semantics: exactly relu_max_pool2d(conv2d(src, weights, bias, 1, 1), 2) with the
// convolution output rounded to src's dtype before the ReLU and the pooling (what the
// composition stores): dst = max over each 2x2 window of max(y, 0), ties to the first
// window position (row-major), windows <= 0 give +0 and no argmax, the first NaN of a window
// is its output (backend/cpu/relu_max_pool.h's rules). The convolution accumulates in f32
// (16-bit operands widened exactly), in an order of our own: results agree with oneDNN's to
// f32 rounding, not bit for bit. bf16 on a CPU with AVX512-BF16 takes its products two at a
// time with vdpbf16ps (as oneDNN's bf16 convolutions do): each exact in f32 and added in turn,
// subnormal operands and sums flushed to zero (MIXPREC_CPU_DISABLE=avx512_bf16 takes the FMAs).
// Seed CNN amp-bf16 on Zen 4, 1 thread: forward 21.5 -> 20.0 ms per step. The backward keeps
// one channel's 9 tap accumulators in registers at a time (the same sums, in the same order):
// its share of the 1-thread step 6.6% -> 5.1% (perf). The f32 forward of 48 and 64 output
// channels kept some accumulators in memory until its channel loop was unrolled: a 64-channel
// first layer on 3x32x32, batch 128, fp32, 1 thread, forward 12.4 -> 7.0 ms.
// Backward (for a finite src, see src_finite): diff_weights [O, C, 3, 3] and diff_bias [O] in f32 (the accumulator, unrounded,
// as onednn's conv2d_backward_weights returns them); no gradient for src (the fused path is
// only taken when src needs none: a CNN's input images).
// Layouts: src any strides; dst channels-last [N, O, H/2, W/2]; argmax packed 4-bit, element
// i of dst in its memory order in byte i / 2 (low nibble for even i), 0..3 or 15 for none.
#pragma once
#include <cstdint>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

struct ConvReluPoolResult {
  Tensor dst;     // [N, O, H/2, W/2], src's dtype, channels-last
  Tensor argmax;  // u8 [ceil(dst.numel() / 2)]: relu_max_pool.h's packed format, k = 2
  // False when src holds inf or NaN. Then the composition's weight gradient is NaN wherever
  // a zero gradient meets the non-finite input (0 x inf), which the fused backward, skipping
  // zeros, would not reproduce: the caller must take the composition's backward instead
  // (expand diff_dst through the argmax, then the convolution's backward-weights).
  bool src_finite = true;
};

struct ConvReluPoolGrads {
  Tensor diff_weights;  // f32 [O, C, 3, 3]
  Tensor diff_bias;     // f32 [O], undefined without bias
};

// True when the fused kernels apply: src [N, C, H, W] with C in 1..3 and H, W >= 2, weights
// [O, C, 3, 3] with O a multiple of 16 up to 64, bias absent or [O], all f32, bf16 or f16 of
// one dtype, stride 1, padding 1, pool 2, and the CPU has AVX-512 (F, BW, VL, DQ).
bool conv_relu_max_pool_applies(const Tensor& src, const Tensor& weights, const Tensor& bias, int64_t stride,
                                int64_t padding, int64_t pool);

ConvReluPoolResult conv_relu_max_pool_forward(const Tensor& src, const Tensor& weights, const Tensor& bias);

// diff_dst: dst's shape and dtype (any layout); argmax as the forward returned it.
ConvReluPoolGrads conv_relu_max_pool_backward_weights(const Tensor& src, const Tensor& diff_dst,
                                                      const Tensor& argmax, const Shape& weights_shape,
                                                      bool with_bias);

}  // namespace mixprec::backend::cpu
