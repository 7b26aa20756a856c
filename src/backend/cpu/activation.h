// backend/cpu/activation.h: exact GELU, dropout and pow by a scalar, forward and backward,
// on dense tensors of any floating dtype. Elementwise loops walk the dense buffer linearly,
// so a channels-last activation stays channels-last; values are computed in double and
// rounded once to the dtype, except GELU: on f32 with AVX-512 or AVX2 it computes in f32 with
// vector polynomials, and on bf16/f16 it looks up tables of the correctly rounded values
// and f32 slopes (activation.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// x dense; outputs in x's dtype and memory format.
Tensor gelu_forward(const Tensor& x);
// diff_dst * gelu'(x); diff_dst in any layout (brought to x's).
Tensor gelu_backward(const Tensor& x, const Tensor& diff_dst);

// One draw per element in buffer order from the global generator (manual_seed), from the
// top 53 bits (the same on every standard library, unlike std::bernoulli_distribution):
// 1 = kept (u >= p). Serial: the draws must not depend on the thread count.
std::shared_ptr<const std::vector<uint8_t>> dropout_mask(int64_t n, double p);
// x * keep * scale (x dense), and the same on diff_dst for backward.
Tensor dropout_forward(const Tensor& x, const std::vector<uint8_t>& keep, double scale);
Tensor dropout_backward(const Tensor& diff_dst, const std::vector<uint8_t>& keep, double scale,
                        const Shape& shape, MemoryFormat format, DType dtype);

// x^e, and diff_dst * e * x^(e - 1) (0 for e == 0: a constant, as PyTorch). x dense.
Tensor pow_forward(const Tensor& x, double exponent);
Tensor pow_backward(const Tensor& x, const Tensor& diff_dst, double exponent);

}  // namespace mixprec::backend::cpu
