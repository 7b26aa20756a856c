// memory.h: the tracking allocator's figures. Every tensor buffer is charged to one
// category; benchmarks and `mixprec compare` read current and peak bytes from here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mixprec {

enum class MemoryCategory : uint8_t {
  activations,      // default: anything created during forward/backward
  parameters,       // module weights (and their 16-bit copies under O2)
  gradients,        // .grad buffers of leaves
  optimizer_state,  // Adam moments, momentum buffers, fp32 master weights
  data,             // batches produced by the data loader
  workspace,        // a kernel's own temporaries, freed before it returns (the f32 copies
                    // of 16-bit emulation: backend/onednn/half_emulation.h)
  count
};

const char* memory_category_name(MemoryCategory c);

struct MemoryStats {
  int64_t current_bytes[size_t(MemoryCategory::count)] = {};
  int64_t peak_bytes[size_t(MemoryCategory::count)] = {};
  int64_t total_current = 0;
  int64_t total_peak = 0;
};

MemoryStats memory_stats();
// Starts a new peak window: every peak becomes the current value.
void reset_peak_memory();
int64_t current_bytes(MemoryCategory c);
int64_t peak_bytes(MemoryCategory c);
// How many heap allocations tensor buffers made since start (blocks reused from the
// caching allocator do not count): a steady-state training step adds none.
int64_t allocation_count();

// Buffers allocated on this thread while the guard lives are charged to `category`.
class MemoryCategoryGuard {
 public:
  explicit MemoryCategoryGuard(MemoryCategory category);
  ~MemoryCategoryGuard();
  MemoryCategoryGuard(const MemoryCategoryGuard&) = delete;
  MemoryCategoryGuard& operator=(const MemoryCategoryGuard&) = delete;

 private:
  MemoryCategory previous_;
};
MemoryCategory current_memory_category();

}  // namespace mixprec
