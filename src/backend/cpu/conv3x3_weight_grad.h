// backend/cpu/conv3x3_weight_grad.h: the weight gradient of a bf16 3x3 convolution (stride 1,
// padding 1, no dilation, one group) on AVX512-BF16, our own kernel instead of oneDNN's.
//
// Why: oneDNN 2.6 has no brgemm weight gradient for bf16 without AMX; its jit_bf16 kernel ran
// the seed CNN's conv2 (32 -> 64 channels, 16x16, batch 256) at 68% of the bf16 GEMM rate,
// where its forward and backward-data ran at 95-98% (ONEDNN_VERBOSE, 1 thread, AMD EPYC Zen 4:
// 15.7 ms against a floor of 10.6; docs/benchmarks.md). The weight gradient is
// dW[o][c][kh][kw] = sum over (n, h, w) of dY[n][h][w][o] * X[n][h + kh - 1][w + kw - 1][c],
// a GEMM whose reduction runs over pixels. vdpbf16ps takes its products two at a time along
// the reduction, so both operands are repacked per image into pixel pairs (w, w + 1) of a row:
// dY as [h][w/2][o] (16 output channels a vector), X as [row][kw][w/2][c] for each of the 3
// column shifts (the padding as zeros), one 32-bit broadcast per (pair, input channel).
//
// Semantics: diff_weights [O, C, 3, 3] and diff_bias [O] in f32, as onednn's
// conv2d_backward_weights returns them for bf16 (the accumulator, unrounded). Each product is
// exact in f32; the sums run in an order of our own (per thread, over its images; thread
// partials added in thread order, so the result depends on the thread count only, as
// oneDNN's does) with vdpbf16ps's rounding (subnormal operands and results flushed to zero,
// as oneDNN's bf16 kernels do). Non-finite inputs propagate (0 x inf is NaN), as oneDNN's.
#pragma once
#include "backend/kernel_params.h"
#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// src [N, C, H, W] and diff_dst [N, O, H, W] bf16 (any layout; channels-last is read without
// a copy), weights_shape [O, C, 3, 3] with O a multiple of 16 and at least 32, p stride 1,
// padding 1, no dilation, one group, an image small enough for its pair buffers to stay in the
// cache (1 MiB), and the CPU has AVX512-BF16 (MIXPREC_CPU_DISABLE=avx512_bf16 hides it).
// Measured against oneDNN's on the same tensors (tests/perf/conv3x3_weight_grad_probe.cpp,
// AMD EPYC Zen 4, 2 threads, GFLOP/s ours / oneDNN's): 32->64 16x16 359/336, 32->32 16x16
// 379/350, 64->64 8x8 396/326, 64->64 32x32 418/360; with 16 outputs oneDNN's was faster
// (16->16 32x32: 240/256, 1 thread 136/151, measured before they were left to oneDNN).
bool conv3x3_weight_grad_applies(const Tensor& src, const Tensor& diff_dst, const Shape& weights_shape,
                                 const Conv2dParams& p);

struct Conv3x3WeightGrads {
  Tensor diff_weights;  // f32 [O, C, 3, 3]
  Tensor diff_bias;     // f32 [O], undefined without bias
};

Conv3x3WeightGrads conv3x3_weight_grad(const Tensor& src, const Tensor& diff_dst, const Shape& weights_shape,
                                       bool with_bias);

}  // namespace mixprec::backend::cpu
