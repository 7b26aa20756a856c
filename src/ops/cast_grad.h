// ops/cast_grad.h: the autograd record of a dtype cast, apart from the conversion itself,
// so a 16-bit copy made elsewhere (amp::offer_cast: written by the fused optimizer step)
// enters the graph exactly as cast(param, dtype) would have: its gradient, in any floating
// dtype, flows back converted to the parameter's dtype.
#pragma once
#include "mixprec/core/tensor.h"

namespace mixprec {

// Makes `out` (src's values in another floating dtype) the output of a "cast" node whose
// input is src. Records nothing when src needs no gradient or grad mode is off.
void record_cast(const Tensor& src, Tensor& out);

}  // namespace mixprec
