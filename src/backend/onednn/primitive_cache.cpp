// backend/onednn/primitive_cache.cpp: the LRU map from PrimKey to cached primitives.
#include "backend/onednn/primitive_cache.h"

#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/half_emulation.h"

#include <unordered_map>
#include <vector>

namespace mixprec::backend::onednn {
namespace {

using Words = std::vector<int64_t>;

struct Slot {
  std::shared_ptr<CacheEntry> entry;
  uint64_t last_use = 0;
};

struct Cache {
  std::mutex mu;
  std::unordered_map<Words, Slot, KeyWordsHash, KeyWordsEqual> map;
  uint64_t clock = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // leaked on purpose: primitives outlive static destructors
  return *c;
}

std::atomic<int64_t> g_creations{0};

}  // namespace

PrimKey& PrimKey::add(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  add(d.ndims);
  for (int i = 0; i < d.ndims; ++i) add(d.dims[i]);
  add(d.data_type);
  add(d.format_kind);
  if (d.format_kind == dnnl_blocked) {
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    for (int i = 0; i < d.ndims; ++i) add(b.strides[i]);
    add(b.inner_nblks);
    for (int i = 0; i < b.inner_nblks; ++i) add(b.inner_blks[i] * 64 + b.inner_idxs[i]);
    for (int i = 0; i < d.ndims; ++i) add(d.padded_dims[i]);
    add(d.offset0);
    add(d.extra.flags);
  }
  return *this;
}

std::shared_ptr<CacheEntry> cache_lookup(const PrimKey& key) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.map.find(key.words());
  if (it == c.map.end()) return nullptr;
  it->second.last_use = ++c.clock;
  return it->second.entry;
}

std::shared_ptr<CacheEntry> cache_insert(const PrimKey& key, std::shared_ptr<CacheEntry> entry) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.map.find(key.words());
  if (it != c.map.end()) return it->second.entry;  // another thread won the race
  if (c.map.size() >= kCacheCapacity) {
    // O(n) scan, but only on a miss with a full cache, which a training loop never reaches.
    auto victim = c.map.begin();
    for (auto j = c.map.begin(); j != c.map.end(); ++j)
      if (j->second.last_use < victim->second.last_use) victim = j;
    c.map.erase(victim);
  }
  const auto w = key.words();
  c.map.emplace(Words(w.begin(), w.end()), Slot{entry, ++c.clock});
  return entry;
}

void note_entry_used(const PrimKey& key, const CacheEntry& entry) {
  if (!dispatch_verbose() || key.words()[0] == static_cast<int64_t>(PrimKind::reorder)) return;
  note_impl(entry.impl);
}

void note_primitive_created() { g_creations.fetch_add(1, std::memory_order_relaxed); }

int64_t onednn_primitive_creations() { return g_creations.load(std::memory_order_relaxed); }

int64_t onednn_primitive_cache_size() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return static_cast<int64_t>(c.map.size());
}

void onednn_clear_primitive_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.map.clear();
}

}  // namespace mixprec::backend::onednn
