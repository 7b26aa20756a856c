// backend/onednn/half_emulation.h: 16-bit compute where oneDNN 2.6.3 has no kernel for the
// dtype, done the way a tensor core does it: the inputs are 16-bit values, widened exactly
// to f32; the f32 oneDNN primitive accumulates in f32; each output is rounded once to the
// 16-bit dtype (round to nearest even). Because f16/bf16 -> f32 is exact, the result is
// bit-identical to running the f32 primitive on the same values and rounding its output.
//
// Which dtypes are emulated:
//  - f16 always: oneDNN 2.6.3 has no f16 kernel on any CPU (limits.md §1.3).
//  - bf16 where oneDNN has no bf16 kernels: it needs at least AVX-512 (avx512_core; it
//    emulates the bf16 instructions itself on AVX-512 CPUs without AVX512-BF16). On an
//    AVX2-only CPU (e.g. AMD Zen2/Zen3) every bf16 primitive is "unimplemented", and without
//    this route the ops layer would fall back to backend/ref's naive float64 loops
//    (~100x slower). MIXPREC_CPU_DISABLE=avx512f forces this route on any CPU (tests).
//
// Every kernel of kernels.h checks its dtypes first, then, for emulated inputs, calls itself
// on widen()ed inputs inside emulate(), which narrows the outputs to the input dtype and logs
// "<op> bf16 -> emulated on <impl>" for MIXPREC_VERBOSE=dispatch.
// Conversions use convert_elements (src/core/convert.h: AVX-512 / AVX2 / F16C, ~0.1-0.6 ns
// per element), one call over the whole buffer, never oneDNN's f16 reorder (a scalar loop
// ~500x slower, limits.md §1.5). The f32 temporaries are ordinary Tensors: the caching
// allocator hands the same blocks back every step, so a steady-state step allocates nothing.
//
// Backward weights of emulated inputs returns diff_weights / diff_bias in f32, like native
// bf16 (see conv.cpp): the f32 accumulator is handed out unrounded. The autograd engine
// casts a gradient to its edge's dtype, so when the weights were 16-bit (an autocast cast, or
// pure-16-bit weights) it is rounded exactly once there: bit-identical to a kernel that wrote
// 16-bit diff_weights, and one code path for native and emulated dtypes.
#pragma once
#include <string>

#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "mixprec/core/memory.h"

namespace mixprec::backend::onednn {

// True when oneDNN runs bf16 primitives on this CPU (avx512_core or better, and AVX-512 not
// switched off by MIXPREC_CPU_DISABLE).
bool has_native_bf16();

// True for a defined tensor of a 16-bit dtype that oneDNN cannot compute on this CPU.
inline bool is_emulated(const Tensor& t) {
  return t.defined() &&
         (t.dtype() == DType::f16 || (t.dtype() == DType::bf16 && !has_native_bf16()));
}

// Emulated 16-bit -> f32 with the same logical shape and memory layout (contiguous,
// channels-last or a permutation of a dense buffer such as a transposed view); anything else
// is made contiguous. Undefined and non-emulated tensors pass through unchanged. The copy is
// charged to the workspace memory category.
Tensor widen(const Tensor& t);
// f32 -> dtype (f16 or bf16), same layout rules. Undefined tensors pass through.
Tensor narrow_to(const Tensor& t, DType dtype);

// Remembers the implementation of the primitive that just ran on this thread (only when
// MIXPREC_VERBOSE=dispatch), so the emulation wrapper can name it.
void note_impl(const std::string& impl);
// Logs "<op> <dtype> -> <dtype> emulated on <impl of the last primitive>" once.
void log_emulated(const char* op, DType dtype);

// Runs fn() (the f32 kernel on widened inputs) and narrows its Tensor result to dtype. The
// f32 copies and the f32 result live only inside this call: they are charged to the
// workspace category, the narrowed result to the caller's (activations, gradients, ...).
template <class Fn>
Tensor emulate(const char* op, DType dtype, Fn&& fn) {
  Tensor wide;
  {
    MemoryCategoryGuard workspace(MemoryCategory::workspace);
    wide = fn();
  }
  Tensor out = narrow_to(wide, dtype);
  if (dispatch_verbose()) log_emulated(op, dtype);
  return out;
}

// Same for results that are not a single Tensor (WeightGrads stay f32; PoolResult narrows
// dst only, the workspace is the f32 forward's argmax): the caller narrows what it needs.
// Only the widened inputs count as workspace here (widen() charges them): the results are
// kept (weight gradients, the pooling workspace).
template <class Fn>
auto emulate_raw(const char* op, DType dtype, Fn&& fn) -> decltype(fn()) {
  auto out = fn();
  if (dispatch_verbose()) log_emulated(op, dtype);
  return out;
}

}  // namespace mixprec::backend::onednn
