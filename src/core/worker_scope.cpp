// core/worker_scope.cpp: which in-process worker the calling thread is (threads.h). Its own
// file because the oneDNN backend's cache keys read it, and the fuzz harnesses link that
// backend file without the thread policy's (cmake/fuzz_sources.cmake).
#include "mixprec/core/threads.h"

namespace mixprec {

namespace {
thread_local int t_worker = 0;
}  // namespace

int current_worker() { return t_worker; }
WorkerScope::WorkerScope(int worker) : previous_(t_worker) { t_worker = worker; }
WorkerScope::~WorkerScope() { t_worker = previous_; }

}  // namespace mixprec
