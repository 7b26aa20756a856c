// convert.h: bulk element conversion between dtypes. The one place casts happen, so that
// autocast, Tensor::to, data loading and checkpoints all round the same way (nearest even,
// NaN stays NaN, f16 overflow to inf, f16 subnormals kept).
// f32<->bf16 and f32<->f16 use AVX512-BF16 / F16C / AVX-512 when the CPU has them; the
// scalar path gives bit-identical results (tested over every 16-bit pattern).
#pragma once
#include <cstdint>

#include "mixprec/core/dtype.h"

namespace mixprec {

// Converts n elements from src (dtype src_dtype) to dst (dtype dst_dtype), both dense.
// Float -> integer truncates toward zero (as PyTorch's .to(int64)); integer -> float rounds.
// Same dtype: a memcpy. Large n runs on the OpenMP threads.
void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

// Element i of a dense buffer, as double / stored from double (slow path: tests, ref backend).
double load_as_double(const void* base, DType dtype, int64_t index);
void store_from_double(void* base, DType dtype, int64_t index, double value);

}  // namespace mixprec
