// dispatch.cpp: backend choice and its one-time notes.
#include "ops/dispatch.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>

namespace mixprec::ops_detail {
namespace {

bool env_contains(const char* name, const char* word) {
  const char* v = std::getenv(name);
  return v && std::strstr(v, word) != nullptr;
}

}  // namespace

bool verbose_dispatch() {
  static const bool on = env_contains("MIXPREC_VERBOSE", "dispatch");
  return on;
}

bool onednn_enabled_for(DType dtype) {
  static const bool forced_ref = env_contains("MIXPREC_BACKEND", "ref");
  if (forced_ref) return false;
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

namespace {
std::atomic<int64_t> g_ref_fallbacks{0};
}  // namespace

void note_ref_fallback() { g_ref_fallbacks.fetch_add(1, std::memory_order_relaxed); }

void note_dispatch(const char* op, DType dtype, const char* backend, const std::string& why) {
  static std::mutex mu;
  static std::set<std::tuple<std::string, DType, std::string>> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (!seen.emplace(op, dtype, backend).second) return;
  // Fallbacks are always worth one line (they cost speed); plain choices only when asked.
  if (why.empty())
    std::fprintf(stderr, "mixprec: dispatch %s %s -> %s\n", op, dtype_name(dtype), backend);
  else
    std::fprintf(stderr, "mixprec: dispatch %s %s -> %s: %s\n", op, dtype_name(dtype), backend,
                 why.c_str());
}

}  // namespace mixprec::ops_detail

namespace mixprec {
int64_t ref_fallback_count() {
  return ops_detail::g_ref_fallbacks.load(std::memory_order_relaxed);
}
}  // namespace mixprec
