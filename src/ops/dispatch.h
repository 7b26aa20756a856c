// dispatch.h: which backend runs an op. f32, bf16 and f16 go to oneDNN (f16, and bf16 on a
// CPU without AVX-512, are emulated there on the f32 kernels: 16-bit values in, f32
// accumulation, 16-bit out; see
// backend/onednn/half_emulation.h); when oneDNN has no kernel (it throws unimplemented) the
// op falls back to backend/ref with a one-time note, and ref_fallback_count() counts it.
// f64 (gradchecks) and integer work always run on ref. MIXPREC_VERBOSE=dispatch prints
// every choice once; MIXPREC_BACKEND=ref forces the reference everywhere (tests).
#pragma once
#include <string>

#include "backend/kernels.h"
#include "mixprec/status.h"

namespace mixprec::ops_detail {

bool onednn_enabled_for(DType dtype);
bool verbose_dispatch();
// Prints "mixprec: dispatch <op> <dtype> -> <backend>" once per (op, dtype, backend).
void note_dispatch(const char* op, DType dtype, const char* backend, const std::string& why = "");
void note_ref_fallback();

// Runs onednn_fn, or ref_fn where oneDNN is not used for dtype or says unimplemented.
template <typename OnednnFn, typename RefFn>
auto dispatch(const char* op, DType dtype, OnednnFn&& onednn_fn, RefFn&& ref_fn)
    -> decltype(ref_fn()) {
  if (onednn_enabled_for(dtype)) {
    try {
      auto result = onednn_fn();
      if (verbose_dispatch()) note_dispatch(op, dtype, "onednn");
      return result;
    } catch (const Error& e) {
      if (e.status().code() != StatusCode::unimplemented) throw;
      note_ref_fallback();
      note_dispatch(op, dtype, "ref (fallback)", e.what());
    }
  } else if (verbose_dispatch()) {
    note_dispatch(op, dtype, "ref");
  }
  return ref_fn();
}

}  // namespace mixprec::ops_detail

namespace mixprec {
// How many op calls fell back from oneDNN to backend/ref (unimplemented) since start: a
// training step in f32, bf16 or f16 must add none (ref runs naive f64 loops, seconds per
// step). Deliberate ref runs (f64, integers, MIXPREC_BACKEND=ref) do not count.
int64_t ref_fallback_count();
}  // namespace mixprec
