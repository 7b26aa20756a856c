// kernel_params.h: the geometry of each kernel family, shared by backend/ref and
// backend/onednn so that both implement exactly the same contracts (see backend/kernels.h).
#pragma once
#include <cstdint>

namespace mixprec::backend {

// 2-D convolution, PyTorch's geometry: weights [O, C / groups, KH, KW]; output channel o
// reads the input channels of its group, o / (O / groups); kernel tap kh reads input row
// oh * stride_h - pad_h + kh * dil_h (dilation 1: adjacent taps). Defaults are the plain
// convolution, so `{s, s, p, p}` still says what most calls mean.
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
};

// 2-D pooling window; padding counts as -inf for max pooling and is included in the
// average's divisor (PyTorch's default, count_include_pad = true).
struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};

enum class BinaryOp : uint8_t { add, sub, mul, div, max, min };
enum class UnaryOp : uint8_t { exp, log, neg, sqrt, abs, tanh, sigmoid, square };
enum class ReduceOp : uint8_t { sum, mean, max, min };

// The op's name in error messages, the same from every backend.
inline const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "reduce_sum";
    case ReduceOp::mean: return "reduce_mean";
    case ReduceOp::max: return "reduce_max";
    case ReduceOp::min: return "reduce_min";
  }
  return "reduce";
}

// PyTorch's output size; a dilated kernel spans dilation * (k - 1) + 1 input positions.
inline int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation = 1) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

}  // namespace mixprec::backend
