// mapped_file.cpp: read-only file mappings (mapped_file.h).
#include "io/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/byte_source.h"
#include "mixprec/files.h"

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

void release_pages(const uint8_t* p, size_t n) {
  if (n == 0) return;
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(p) & ~(page - 1);
  const uintptr_t end = (uintptr_t(p) + n + page - 1) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: a failure only costs memory
}

}  // namespace mixprec::io
