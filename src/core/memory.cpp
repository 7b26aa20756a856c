// memory.cpp: the tracking allocator. Every Storage charges its bytes to one category;
// figures are process-wide (atomics), the category in force is per thread.
#include "mixprec/core/memory.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION: no-ops without ASan
#include <sys/mman.h>
#include <unordered_map>
#include <vector>

#include "core/storage.h"

namespace mixprec {
namespace {

constexpr size_t kCategories = size_t(MemoryCategory::count);
std::atomic<int64_t> g_current[kCategories];
std::atomic<int64_t> g_peak[kCategories];
std::atomic<int64_t> g_total_current{0};
std::atomic<int64_t> g_total_peak{0};
std::atomic<int64_t> g_allocations{0};
thread_local MemoryCategory t_category = MemoryCategory::activations;

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

void charge(MemoryCategory c, int64_t bytes) {
  const auto i = size_t(c);
  raise_peak(g_peak[i], g_current[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(g_total_peak, g_total_current.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void release(MemoryCategory c, int64_t bytes) {
  g_current[size_t(c)].fetch_sub(bytes, std::memory_order_relaxed);
  g_total_current.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::parameters: return "parameters";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::optimizer_state: return "optimizer_state";
    case MemoryCategory::data: return "data";
    case MemoryCategory::workspace: return "workspace";
    case MemoryCategory::count: break;
  }
  return "?";
}

MemoryStats memory_stats() {
  MemoryStats s;
  for (size_t i = 0; i < kCategories; ++i) {
    s.current_bytes[i] = g_current[i].load();
    s.peak_bytes[i] = g_peak[i].load();
  }
  s.total_current = g_total_current.load();
  s.total_peak = g_total_peak.load();
  return s;
}

void reset_peak_memory() {
  for (size_t i = 0; i < kCategories; ++i) g_peak[i].store(g_current[i].load());
  g_total_peak.store(g_total_current.load());
}

int64_t current_bytes(MemoryCategory c) { return g_current[size_t(c)].load(); }
int64_t peak_bytes(MemoryCategory c) { return g_peak[size_t(c)].load(); }
int64_t allocation_count() { return g_allocations.load(); }

MemoryCategoryGuard::MemoryCategoryGuard(MemoryCategory category) : previous_(t_category) {
  t_category = category;
}
MemoryCategoryGuard::~MemoryCategoryGuard() { t_category = previous_; }
MemoryCategory current_memory_category() { return t_category; }

// 64-byte alignment: one cache line, and what AVX-512 loads and oneDNN like.
constexpr size_t kAlignment = 64;

namespace {

// The caching allocator: freed blocks wait in per-size free lists and are handed out
// again to a request of the same rounded size. A training step allocates the same shapes
// every time, so from the second step on it makes no heap allocation, and large blocks
// are not returned to the OS and page-faulted in again each step (glibc mmaps them).
// The tracked figures (memory_stats) count live tensor bytes, not cached blocks.
//
// Under AddressSanitizer the cache would hide what ASan is for: a block given back is still
// allocated as far as malloc knows, so a read through a dangling pointer (a NumPy view whose
// storage was released too early) would read a cached or reused block without a report. So
// a cached block is poisoned whole, and a live one from its requested size to its rounded
// end: ASan then reports a use after release and a read past a tensor's bytes as it would
// for malloc's own blocks (scripts/sanitize). The macros do nothing in other builds.
class BlockCache {
 public:
  void* take(size_t rounded) {
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(rounded);
      if (it == free_.end() || it->second.empty()) return nullptr;
      p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= rounded;
    }
    ASAN_UNPOISON_MEMORY_REGION(p, rounded);  // the caller poisons the tail past its bytes
    return p;
  }
  void give(void* p, size_t rounded) {
    // Poisoned before it is listed: once listed, another thread may take it at once.
    ASAN_POISON_MEMORY_REGION(p, rounded);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_bytes_ + rounded <= kMaxCachedBytes) {
        free_[rounded].push_back(p);
        cached_bytes_ += rounded;
        return;
      }
    }
    ASAN_UNPOISON_MEMORY_REGION(p, rounded);
    std::free(p);
  }
  ~BlockCache() {
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) {
        ASAN_UNPOISON_MEMORY_REGION(p, size);
        std::free(p);
      }
  }

 private:
  // Bounded, so a run whose shapes keep changing cannot hoard memory.
  static constexpr size_t kMaxCachedBytes = size_t(2) << 30;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: storages may outlive statics
  return *cache;
}

size_t rounded_size(size_t bytes) {
  const size_t r = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return r == 0 ? kAlignment : r;
}

// Blocks of at least one huge page start on a 2 MiB boundary and are offered to the kernel
// as transparent huge pages (madvise; most distributions' default THP mode is "madvise", so
// nothing is backed by huge pages unless asked). Activations, gradients and optimizer state
// are streamed once per pass: with 4 KiB pages the hardware prefetchers stop at every page
// boundary and each page costs a TLB miss. Only whole aligned 2 MiB ranges become huge pages;
// the block's tail stays on small pages, so resident memory does not grow.
constexpr size_t kHugePage = size_t(2) << 20;

void* allocate_block(size_t rounded) {
  if (rounded < kHugePage) return std::aligned_alloc(kAlignment, rounded);
  // posix_memalign: aligned_alloc may refuse a size that is not a multiple of the alignment.
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, rounded) != 0) return nullptr;
  (void)madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: ignore a refusal
  return p;
}

}  // namespace

Storage::Storage(size_t bytes, MemoryCategory category) : bytes_(bytes), category_(category) {
  const size_t rounded = rounded_size(bytes);
  data_ = block_cache().take(rounded);
  if (!data_) {
    data_ = allocate_block(rounded);
    if (!data_) throw std::bad_alloc();
    g_allocations.fetch_add(1, std::memory_order_relaxed);  // counts heap allocations only
  }
  // The rounding is the allocator's, not the tensor's: ASan reports a read past `bytes`.
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(data_) + bytes, rounded - bytes);
  charge(category_, int64_t(bytes_));
}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<void> owner)
    : data_(data), bytes_(bytes), category_(MemoryCategory::data), external_(true),
      external_owner_(std::move(owner)) {}

Storage::~Storage() {
  if (external_) return;  // not ours: the owner (released with this object) frees it
  release(category_, int64_t(bytes_));
  block_cache().give(data_, rounded_size(bytes_));
}

void Storage::recharge(MemoryCategory category) {
  if (category == category_) return;
  if (external_) {  // never charged, so nothing to move
    category_ = category;
    return;
  }
  release(category_, int64_t(bytes_));
  category_ = category;
  charge(category_, int64_t(bytes_));
}

}  // namespace mixprec
