// backend/onednn/serial_scope.h: run small oneDNN executions on the calling thread only.
//
// Why: each oneDNN execution is one OpenMP parallel region. On this 2-vCPU host, shared
// with other processes, a region whose second thread is descheduled waits for it: a
// reorder of a few KiB then costs a scheduler slice (~4-8 ms, seen in ONEDNN_VERBOSE
// timings under load) instead of microseconds. oneDNN's OpenMP build runs a primitive on
// the thread count it read from omp_get_max_threads() - at creation for some (jit:uni
// reorder), at execution for others - and skips the parallel region when that is 1. So a
// scope that sets the calling thread's ICV to 1 must cover both the primitive's creation
// (the cache miss) and every execution; the key must imply the same choice on every call
// (callers decide from the sizes in the key). Not for primitives worth two threads.
#pragma once
#include <omp.h>

#include <cstddef>

namespace mixprec::backend::onednn {

class SerialScope {
 public:
  explicit SerialScope(bool serial) : restore_(serial ? omp_get_max_threads() : 0) {
    if (restore_ > 1) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (restore_ > 1) omp_set_num_threads(restore_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int restore_;
};

}  // namespace mixprec::backend::onednn
