// dispatch_log.cpp: the MIXPREC_VERBOSE=dispatch switch and its once-per-line log.
#include "backend/dispatch_log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace mixprec::backend {
namespace {

std::atomic<bool>& verbose_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("MIXPREC_VERBOSE");
    return v != nullptr && std::strstr(v, "dispatch") != nullptr;
  }()};
  return on;
}

struct Log {
  std::mutex mu;
  std::set<std::string> seen;
  std::function<void(const std::string&)> sink;
};

Log& log() {
  static Log l;
  return l;
}

}  // namespace

bool dispatch_verbose() { return verbose_flag().load(std::memory_order_relaxed); }

void set_dispatch_verbose(bool on) { verbose_flag().store(on); }

void dispatch_log_line(const std::string& text) {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.sink) {
    l.sink(text);
    return;
  }
  if (!l.seen.insert(text).second) return;
  std::fprintf(stderr, "mixprec: dispatch %s\n", text.c_str());
}

void set_dispatch_sink(std::function<void(const std::string&)> sink) {
  Log& l = log();
  std::lock_guard<std::mutex> lock(l.mu);
  l.sink = std::move(sink);
}

}  // namespace mixprec::backend
