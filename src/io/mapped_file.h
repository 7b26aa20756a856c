// io/mapped_file.h: a regular file mapped read-only, for data too big to copy into memory (a
// language model's text corpus, data.h). The pages are the page cache's: touching them costs
// no anonymous memory, and release_pages drops them from this process's resident set again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mixprec/core/status.h"

namespace mixprec::io {

struct MappedFile {
  std::shared_ptr<const uint8_t> bytes;  // unmapped when the last copy goes; null for an empty file
  uint64_t size = 0;
};

// Opens path with open_regular_file (a FIFO, directory or device is refused at once, with
// its messages), refuses a file of more than max_bytes (data_loss giving its size), and maps
// it PROT_READ + MAP_PRIVATE with MADV_RANDOM (readers jump around; read-ahead would only
// fill the page cache with bytes nobody asked for). An empty file maps to no bytes. The
// file must not shrink while mapped: reading past its new end raises SIGBUS (as for every
// mmap reader).
StatusOr<MappedFile> map_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// Drops the pages holding [p, p + n) from this process's resident set, and with them the
// rest of the aligned 2 MiB blocks around it that a fault there may have mapped (see the
// .cpp), never going outside the mapping [map, map + map_size) that holds the range:
// MADV_DONTNEED on a private, never written file mapping unmaps them, the page cache keeps
// them, and the next read faults them back with the file's bytes. So a reader that releases
// what it has copied keeps its RSS independent of the file's size. Harmless while another
// thread reads the same pages (it faults them in again).
void release_pages(const uint8_t* p, size_t n, const uint8_t* map, size_t map_size);

}  // namespace mixprec::io
