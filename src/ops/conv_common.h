// conv_common.h: what the convolution ops share inside src/ops. conv2d, conv1d (a conv2d of
// unit height) and the transposed convolutions (conv2d's kernels with forward and
// backward-data swapped) all run conv2d's kernels; only conv2d's own file holds the kernel
// calls and backward of a direct convolution.
#pragma once
#include <cstdint>
#include <string>

#include "backend/kernel_params.h"
#include "mixprec/status.h"
#include "mixprec/tensor.h"

namespace mixprec::ops_detail {

// A direct 2-D convolution with per-axis stride and padding on inputs the caller's row has
// already cast: shape and dtype checks, the kernel, the backward closure. `op` names the
// public op in error messages.
Tensor conv2d_with_params(const char* op, const Tensor& src, const Tensor& weights, const Tensor& bias,
                          const backend::Conv2dParams& p);

// PyTorch's convolution arguments that mixprec's kernels do not take yet: dilation and
// groups other than 1 are refused with a clear error (docs/amp.md, "Other differences").
inline void require_unit(const char* op, const char* what, int64_t value) {
  if (value != 1)
    throw Error(Status::invalid_argument(std::string(op) + ": " + what + " " + std::to_string(value) +
                                         " is not supported (mixprec's convolutions take " + what + " 1)"));
}

}  // namespace mixprec::ops_detail
