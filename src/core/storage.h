// storage.h: a 64-byte aligned buffer charged to the tracking allocator (memory.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "mixprec/core/memory.h"

namespace mixprec {

class Storage {
 public:
  // Allocates `bytes` (uninitialised), charged to `category`.
  Storage(size_t bytes, MemoryCategory category);
  // Wraps `bytes` at `data`, memory someone else owns (a NumPy array the Python package shares
  // without copying): `owner` is held while this storage lives and released with it. Nothing
  // is charged to the tracking allocator, which did not allocate it.
  Storage(void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemoryCategory category() const { return category_; }
  // Moves the charge to another category (a tensor becoming a parameter or a .grad).
  void recharge(MemoryCategory category);
  // Bumped by every in-place write through any tensor viewing this buffer (detach() and
  // reshape views share it), so caches of derived copies (oneDNN weight layouts, autocast
  // casts) can tell the data changed.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryCategory category_;
  uint64_t version_ = 0;
  bool external_ = false;                 // wrapped memory: not ours to free or charge
  std::shared_ptr<void> external_owner_;
};

}  // namespace mixprec
