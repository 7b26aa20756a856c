// status.cpp: names of status codes and the loud failure path of MIXPREC_CHECK.
#include "mixprec/core/status.h"

#include <cstdio>
#include <cstdlib>

namespace mixprec {

const char* Status::code_name() const {
  switch (code_) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::data_loss: return "data loss";
    case StatusCode::not_found: return "not found";
    case StatusCode::unimplemented: return "unimplemented";
    case StatusCode::io_error: return "I/O error";
    case StatusCode::diverged: return "diverged";
    case StatusCode::bad_checkpoint: return "bad checkpoint";
    case StatusCode::busy: return "busy";
    case StatusCode::distributed: return "distributed";
    case StatusCode::internal: return "internal error";
    case StatusCode::resource_exhausted: return "resource exhausted";
  }
  return "?";
}

void throw_if_error(const Status& s) {
  if (!s.is_ok()) throw Error(s);
}

namespace detail {
void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  // An engine bug: say where, then stop. Throwing would let callers swallow it.
  std::fprintf(stderr, "mixprec: internal check failed at %s:%d: %s: %s\n", file, line, cond,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace mixprec
