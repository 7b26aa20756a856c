// backend/onednn/weights_cache.cpp: see weights_cache.h for the key and invalidation rule.
#include "backend/onednn/weights_cache.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/onednn/memory_desc.h"
#include "backend/onednn/onednn_stats.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"
#include "core/storage.h"

namespace mixprec::backend::onednn {
namespace {

struct WeightEntry {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  Tensor buffer;  // u8 [bytes], charged to MemoryCategory::parameters
};

struct WeightCache {
  std::mutex mu;
  std::unordered_map<std::vector<int64_t>, WeightEntry, KeyWordsHash, KeyWordsEqual> map;
};

WeightCache& weight_cache() {
  static WeightCache* c = new WeightCache();  // leaked: outlives static destructors
  return *c;
}

std::atomic<int64_t> g_reorders{0};

// Takes the buffer of a dead entry of `bytes` bytes, or allocates one; drops other dead
// entries. Called with the cache lock held, on a miss only.
Tensor recycle_or_allocate(WeightCache& c, size_t bytes) {
  Tensor found;
  for (auto it = c.map.begin(); it != c.map.end();) {
    if (!it->second.storage.expired()) {
      ++it;
      continue;
    }
    if (!found.defined() && it->second.buffer.numel() == static_cast<int64_t>(bytes))
      found = it->second.buffer;
    it = c.map.erase(it);
  }
  if (found.defined()) return found;
  MemoryCategoryGuard guard(MemoryCategory::parameters);
  return Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8);
}

}  // namespace

Tensor weights_in_layout(const Tensor& w, const dnnl_md& target) { return weights_in_layout(w, md_of(w), target); }

Tensor weights_in_layout(const Tensor& w, const dnnl_md& user, const dnnl_md& target) {
  if (user == target) return w;
  PrimKey key(PrimKind::reorder);
  key.add(reinterpret_cast<intptr_t>(w.data())).add(user).add(target);

  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  const uint64_t version = w.storage()->version();
  auto it = c.map.find(key.words());
  if (it != c.map.end()) {
    WeightEntry& e = it->second;
    if (e.storage.lock() == w.storage() && e.version == version) return e.buffer;
    if (e.storage.lock() != w.storage()) e.storage = w.storage();
    e.version = version;
    execute_reorder(user, w.data(), target, e.buffer.data());
    g_reorders.fetch_add(1, std::memory_order_relaxed);
    return e.buffer;
  }
  WeightEntry e;
  e.storage = w.storage();
  e.version = version;
  e.buffer = recycle_or_allocate(c, target.get_size());
  execute_reorder(user, w.data(), target, e.buffer.data());
  g_reorders.fetch_add(1, std::memory_order_relaxed);
  Tensor out = e.buffer;
  const auto words = key.words();
  c.map.emplace(std::vector<int64_t>(words.begin(), words.end()), std::move(e));
  return out;
}

int64_t onednn_weight_reorders() { return g_reorders.load(std::memory_order_relaxed); }

int64_t onednn_weight_cache_size() {
  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return static_cast<int64_t>(c.map.size());
}

void onednn_clear_weight_cache() {
  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.map.clear();
}

}  // namespace mixprec::backend::onednn
