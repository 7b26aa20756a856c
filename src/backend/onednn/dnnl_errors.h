// backend/onednn/dnnl_errors.h: what the oneDNN backend cannot do, as mixprec errors: a dtype
// oneDNN cannot compute in, and a dnnl::error translated so that the ops layer falls back
// (unimplemented) or reports it (internal).
#pragma once
#include <dnnl.hpp>

#include <string>

#include "mixprec/core/dtype.h"

namespace mixprec::backend::onednn {

// oneDNN 2.6.3 computes in f32 and bf16 only (limits.md §1.3: no f16 compute primitive on
// CPU). Anything else throws Error(unimplemented) naming the op, so the ops layer falls
// back (f16 emulation, f64 ref).
void require_compute_dtype(const char* op, DType d);

// Translates a dnnl::error thrown while creating a primitive: dnnl_unimplemented becomes
// Error(unimplemented) and anything else Error(internal); `what` names op, dtypes, shapes.
[[noreturn]] void rethrow_dnnl(const dnnl::error& e, const std::string& what);

}  // namespace mixprec::backend::onednn
