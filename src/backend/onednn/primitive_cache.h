// backend/onednn/primitive_cache.h: create each oneDNN primitive once, reuse it every step.
// Creating a primitive_desc + primitive costs tens of microseconds to milliseconds (JIT
// code generation); executing a cached one costs only the kernel. Training shapes repeat
// every step, so a steady-state step creates nothing (benchmarks assert this with
// onednn_primitive_creations()).
//
// Key: the op kind, then words describing every memory desc (dims, dtype, strides), the
// geometry and any attributes, all as int64 words (PrimKey). Entries are op-specific
// subclasses of CacheEntry holding the primitive, the descs oneDNN chose, and reusable
// dnnl::memory objects whose data handles are re-pointed on each call, so a cache hit
// allocates nothing on the heap.
// Eviction: least recently used once more than kCacheCapacity entries exist (oneDNN's own
// primitive cache uses the same capacity).
// A problem oneDNN cannot do (dnnl_unimplemented) is cached too, as the Error to rethrow, so
// the ops layer's fallback does not pay for a failed creation on every call.
#pragma once
#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/onednn/onednn_stats.h"
#include "mixprec/core/threads.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::onednn {

inline constexpr size_t kCacheCapacity = 1024;

enum class PrimKind : int64_t {
  conv_fwd = 1, conv_bwd_data, conv_bwd_weights,
  linear_fwd, linear_bwd_data, linear_bwd_weights, matmul,
  eltwise_fwd, eltwise_bwd, pool_fwd, pool_bwd,
  softmax_fwd, softmax_bwd, binary, reduction, reorder,
};

// The words of one cache key, stored inline (no heap allocation while building it).
class PrimKey {
 public:
  static constexpr size_t kMaxWords = 160;
  // The calling thread's OpenMP thread count is part of a primitive's key: oneDNN fixes the
  // thread count of many primitives (jit convolutions, reorders) when it creates them and
  // runs them on that many threads whatever the count is later, so a primitive made for 2
  // threads must not serve a caller that now computes on 1 (mixprec/core/threads.h changes the
  // count at run time). The weights cache, whose buffers do not depend on it, leaves it out.
  // So is the worker (mixprec/core/threads.h: bench --workers): an entry's memory objects are
  // re-pointed and run under its lock, so workers that shared an entry would take turns.
  explicit PrimKey(PrimKind kind, bool with_thread_count = true) {
    add(static_cast<int64_t>(kind));
    if (with_thread_count) add(omp_get_max_threads()).add(current_worker());
  }
  PrimKey& add(int64_t w) {
    MIXPREC_CHECK(size_ < kMaxWords, "PrimKey: more than 160 words; raise kMaxWords");
    words_[size_++] = w;
    return *this;
  }
  // ndims, dims, dtype, format kind and, for blocked/strided descs, strides and inner blocks.
  PrimKey& add(const dnnl::memory::desc& md);
  std::span<const int64_t> words() const { return {words_.data(), size_}; }

 private:
  std::array<int64_t, kMaxWords> words_;  // only the first size_ are meaningful
  size_t size_ = 0;
};

// Hash and equality over key words, transparent so a lookup by span builds no vector.
struct KeyWordsHash {
  using is_transparent = void;
  size_t operator()(std::span<const int64_t> w) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (int64_t x : w) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
  size_t operator()(const std::vector<int64_t>& w) const {
    return (*this)(std::span<const int64_t>(w));
  }
};
struct KeyWordsEqual {
  using is_transparent = void;
  static bool eq(std::span<const int64_t> a, std::span<const int64_t> b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  bool operator()(const std::vector<int64_t>& a, const std::vector<int64_t>& b) const {
    return a == b;
  }
  bool operator()(std::span<const int64_t> a, const std::vector<int64_t>& b) const { return eq(a, b); }
  bool operator()(const std::vector<int64_t>& a, std::span<const int64_t> b) const { return eq(a, b); }
};

// Base of every cached entry. `mu` is held while a caller re-points the entry's memory
// objects and executes it, so two threads sharing an entry cannot interleave.
struct CacheEntry {
  virtual ~CacheEntry() = default;
  std::mutex mu;
  std::string impl;           // oneDNN's implementation name, e.g. "brgconv:avx512_core"
  std::string unimplemented;  // non-empty: a cached failure (message of the Error to rethrow)
};

std::shared_ptr<CacheEntry> cache_lookup(const PrimKey& key);
// Inserts (or keeps an entry another thread inserted first) and returns the cached one.
std::shared_ptr<CacheEntry> cache_insert(const PrimKey& key, std::shared_ptr<CacheEntry> entry);
void note_primitive_created();
// Records the compute primitive about to run (reorders excluded) for the f16 emulation's
// dispatch log (half_emulation.h); a no-op unless MIXPREC_VERBOSE=dispatch.
void note_entry_used(const PrimKey& key, const CacheEntry& entry);

// Returns the entry for `key`, calling make() (which returns std::shared_ptr<E>) on a miss.
// If make() throws Error(unimplemented), the failure is cached and rethrown on later hits.
template <class E, class Make>
std::shared_ptr<E> cached(const PrimKey& key, Make&& make) {
  std::shared_ptr<CacheEntry> hit = cache_lookup(key);
  if (!hit) {
    try {
      hit = cache_insert(key, make());
    } catch (const Error& e) {
      if (e.status().code() != StatusCode::unimplemented) throw;
      auto failed = std::make_shared<CacheEntry>();
      failed->unimplemented = e.status().message();
      cache_insert(key, failed);
      throw;
    }
  }
  if (!hit->unimplemented.empty()) throw Error(Status::unimplemented(hit->unimplemented));
  note_entry_used(key, *hit);
  return std::static_pointer_cast<E>(hit);
}

// Every primitive mixprec creates goes through here, so the counter sees all of them.
template <class P, class PD>
P make_primitive(const PD& pd) {
  note_primitive_created();
  return P(pd);
}

}  // namespace mixprec::backend::onednn
