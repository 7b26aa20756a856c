// backend/cpu/gelu_table.h: GELU and its backward on bf16 / f16 by lookup (activation.cpp's
// gelu_forward / gelu_backward take this route for 16-bit tensors).
#pragma once
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec::backend::cpu {

// dst = gelu(src) (diff_dst null) or dst = diff_dst * gelu'(src): n dense values, all three
// buffers of dtype (bf16 or f16).
void gelu16_path(const void* src, const void* diff_dst, void* dst, DType dtype, int64_t n);

}  // namespace mixprec::backend::cpu
