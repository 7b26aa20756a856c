// backend/cpu/log.h: the natural log of a dense f32 tensor, within an ulp or so of the true
// value everywhere, as PyTorch's: oneDNN 2.6's eltwise log has an absolute error up to 3.7e-6
// (log(1) = -1.4e-6: a relative error without bound near 1) and reads denormals as the
// smallest normal number, so f32 log runs here. bf16 and f16 stay on oneDNN (its error is far
// below their rounding).
// With AVX-512: Cephes' logf (a degree-9 polynomial on the mantissa in [sqrt(1/2), sqrt(2)),
// the exponent from vgetexpps, so denormals are exact inputs too), peak error ~1 ulp; without,
// the C library's logf element by element. The two may differ in the last bit.
// log(+0) = log(-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(NaN) = NaN.
#pragma once

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// A dense f32 tensor: log_forward takes it.
bool log_applies(const Tensor& x);
// log(x), in x's memory format.
Tensor log_forward(const Tensor& x);

}  // namespace mixprec::backend::cpu
