// mapped_file.cpp: read-only file mappings (mapped_file.h).
#include "io/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/byte_source.h"
#include "mixprec/io/files.h"

namespace mixprec::io {

StatusOr<MappedFile> map_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  auto opened = open_regular_file_within(path, what, max_bytes);
  if (!opened.is_ok()) return opened.status();
  const int fd = opened->fd;
  MappedFile out;
  out.size = opened->size;
  if (out.size == 0) {  // mmap refuses a length of 0; there is nothing to read anyway
    ::close(fd);
    return out;
  }
  void* p = ::mmap(nullptr, size_t(out.size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file open
  if (p == MAP_FAILED) return Status::io_error("cannot map " + what + " '" + path + "': " + std::strerror(err));
  ::madvise(p, size_t(out.size), MADV_RANDOM);  // advice only: its failure changes nothing
  const size_t length = size_t(out.size);
  out.bytes = std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(p),
                                             [length](const uint8_t* q) { ::munmap(const_cast<uint8_t*>(q), length); });
  return out;
}

void release_pages(const uint8_t* p, size_t n, const uint8_t* map, size_t map_size) {
  if (n == 0 || map_size == 0) return;
  // Not only the pages of [p, p + n): a read fault maps what the page cache already holds
  // around the page asked for (fault-around, 64 KiB; on kernels with large page-cache
  // folios the whole folio, up to 2 MiB), so releasing the window's own page left the rest
  // resident: 6 GiB of text trained with 25% more peak RSS than 6 MiB did. The aligned 2 MiB
  // blocks around the range hold all of that, cut to the mapping: past its ends lie other
  // mappings (a library's data, the heap), which MADV_DONTNEED would wipe. Another thread
  // reading nearby only faults its page in again: the mapping is private and never written.
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t block = std::max<uintptr_t>(page, uintptr_t(2) << 20);
  const uintptr_t map_lo = uintptr_t(map) & ~(page - 1);             // mmap's start: page-aligned
  const uintptr_t map_hi = (uintptr_t(map) + map_size + page - 1) & ~(page - 1);  // its last page
  const uintptr_t begin = std::max(uintptr_t(p) & ~(block - 1), map_lo);
  const uintptr_t end = std::min((uintptr_t(p) + n + block - 1) & ~(block - 1), map_hi);
  if (end <= begin) return;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: a failure only costs memory
}

}  // namespace mixprec::io
