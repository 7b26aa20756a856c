// dispatch.h: which backend runs an op. f32 and bf16 go to oneDNN; when oneDNN has no
// kernel (it throws unimplemented) the op falls back to backend/ref with a one-time note.
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
      note_dispatch(op, dtype, "ref (fallback)", e.what());
    }
  } else if (verbose_dispatch()) {
    note_dispatch(op, dtype, "ref");
  }
  return ref_fn();
}

}  // namespace mixprec::ops_detail
