// dispatch.cpp: the route's switches (MIXPREC_BACKEND) and its notes.
#include "ops/dispatch.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace mixprec::ops_detail {
namespace {

std::atomic<bool>& forced_ref_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("MIXPREC_BACKEND");
    return v != nullptr && std::strstr(v, "ref") != nullptr;
  }()};
  return on;
}

std::atomic<int64_t> g_ref_fallbacks{0};

}  // namespace

bool forced_ref() { return forced_ref_flag().load(std::memory_order_relaxed); }

void set_forced_ref(bool on) { forced_ref_flag().store(on); }

bool onednn_enabled_for(DType dtype) {
  if (forced_ref()) return false;
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

void note_ref_fallback() { g_ref_fallbacks.fetch_add(1, std::memory_order_relaxed); }

void note_dispatch(const char* op, DType dtype, const char* backend, const std::string& why) {
  const std::string line = std::string(op) + " " + dtype_name(dtype) + " -> " + backend;
  if (why.empty()) return backend::dispatch_log_line(line);
  // A fallback's reason names shapes: one line per (op, dtype, backend), as for the others.
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(line).second) return;
  }
  backend::dispatch_log_line(line + ": " + why);
}

}  // namespace mixprec::ops_detail

namespace mixprec {
int64_t ref_fallback_count() {
  return ops_detail::g_ref_fallbacks.load(std::memory_order_relaxed);
}
}  // namespace mixprec
