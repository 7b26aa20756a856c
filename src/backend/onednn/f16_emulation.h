// backend/onednn/f16_emulation.h: f16 compute on a CPU where oneDNN 2.6.3 has no f16
// kernel (limits.md §1.3), done the way a tensor core does it: the inputs are f16 values,
// widened exactly to f32; the f32 oneDNN primitive accumulates in f32; each output is
// rounded once to f16 (round to nearest even). Because f16 -> f32 is exact, the result is
// bit-identical to running the f32 primitive on the same values and rounding its output.
//
// Every kernel of kernels.h checks its dtypes first, then, for f16 inputs, calls itself on
// widen()ed inputs inside emulate_f16(), which narrows the outputs and logs
// "<op> f16 -> f16 emulated on <impl>" for MIXPREC_VERBOSE=dispatch.
// Conversions use convert_elements (src/core/convert.h: F16C / AVX-512, ~0.1-0.6 ns per
// element), one call over the whole buffer, never oneDNN's f16 reorder (a scalar loop
// ~500x slower, limits.md §1.5). The f32 temporaries are ordinary Tensors: the caching
// allocator hands the same blocks back every step, so a steady-state step allocates nothing.
//
// Backward weights of f16 inputs returns diff_weights / diff_bias in f32, like bf16 (see
// conv.cpp): the f32 accumulator is handed out unrounded. The autograd engine casts a
// gradient to its edge's dtype, so when the weights were f16 (an autocast cast, or pure-f16
// weights) it is rounded to f16 exactly once there: bit-identical to a kernel that wrote f16
// diff_weights, and one code path for bf16 and f16.
#pragma once
#include <string>

#include "backend/kernels.h"
#include "backend/onednn/memory_util.h"

namespace mixprec::backend::onednn {

inline bool is_f16(const Tensor& t) { return t.defined() && t.dtype() == DType::f16; }

// f16 -> f32 with the same logical shape and memory layout (contiguous, channels-last or a
// permutation of a dense buffer such as a transposed view); anything else is made
// contiguous. Undefined and non-f16 tensors pass through unchanged.
Tensor widen(const Tensor& t);
// f32 -> f16, same layout rules. Undefined tensors pass through.
Tensor narrow_to_f16(const Tensor& t);

// Remembers the implementation of the primitive that just ran on this thread (only when
// MIXPREC_VERBOSE=dispatch), so the f16 wrapper can name it.
void note_impl(const std::string& impl);
// Logs "<op> f16 -> f16 emulated on <impl of the last primitive>" once.
void log_f16_emulated(const char* op);

// Runs fn() (the f32 kernel on widened inputs) and narrows its Tensor result to f16.
template <class Fn>
Tensor emulate_f16(const char* op, Fn&& fn) {
  Tensor out = narrow_to_f16(fn());
  if (dispatch_verbose()) log_f16_emulated(op);
  return out;
}

// Same for results that are not a single Tensor (WeightGrads stay f32; PoolResult narrows
// dst only, the workspace is the f32 forward's argmax): the caller narrows what it needs.
template <class Fn>
auto emulate_f16_raw(const char* op, Fn&& fn) -> decltype(fn()) {
  auto out = fn();
  if (dispatch_verbose()) log_f16_emulated(op);
  return out;
}

}  // namespace mixprec::backend::onednn
