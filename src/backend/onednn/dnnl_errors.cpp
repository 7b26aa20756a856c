// backend/onednn/dnnl_errors.cpp: see dnnl_errors.h. Each refusal is also logged under
// MIXPREC_VERBOSE=dispatch (dispatch_log.h).
#include "backend/onednn/dnnl_errors.h"

#include "backend/onednn/dispatch_log.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::onednn {

void require_compute_dtype(const char* op, DType d) {
  if (d == DType::f32 || d == DType::bf16) return;
  std::string why = d == DType::f16
                        ? "oneDNN 2.6.3 has no f16 compute kernel on CPU"
                        : std::string("oneDNN has no ") + dtype_name(d) + " kernels";
  if (dispatch_verbose()) dispatch_log(std::string(op) + " " + dtype_name(d), "unimplemented");
  throw Error(Status::unimplemented(std::string(op) + ": dtype " + dtype_name(d) +
                                    " unsupported by the onednn backend (" + why +
                                    "; expected f32 or bf16)"));
}

[[noreturn]] void rethrow_dnnl(const dnnl::error& e, const std::string& what) {
  if (e.status == dnnl_unimplemented) {
    if (dispatch_verbose()) dispatch_log(what, "unimplemented");
    throw Error(Status::unimplemented(what + ": oneDNN has no implementation (" + e.what() + ")"));
  }
  // oneDNN cannot express some degenerate problems (e.g. a reduction to a 0-d result):
  // the reference backend can, so let the ops layer fall back rather than fail.
  if (e.status == dnnl_invalid_arguments) {
    if (dispatch_verbose()) dispatch_log(what, "rejected by oneDNN");
    throw Error(Status::unimplemented(what + ": oneDNN rejected the problem (" + e.what() + ")"));
  }
  throw Error(Status::internal(what + ": oneDNN error " + std::to_string(int(e.status)) + " (" +
                               e.what() + ")"));
}

}  // namespace mixprec::backend::onednn
