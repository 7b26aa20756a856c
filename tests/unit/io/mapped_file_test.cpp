// mapped_file_test: a mapped text's pages leave the resident set when released, including the
// neighbours the kernel maps with each fault. A read fault on a file mapping maps up to
// fault_around_bytes (64 KiB by default) of pages already in the page cache around the page
// asked for, so releasing only the window's own page left ~15 more mapped per window: a
// 6 GiB corpus trained with 29 MiB more peak RSS than a 6 MiB one (bench/big_corpus.sh).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace mixprec::io {
namespace {

// The resident KiB of the mapping that starts at `start` (its "Rss:" line in /proc/self/smaps).
long mapping_rss_kib(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      in_mapping = lo == reinterpret_cast<uintptr_t>(start);
      continue;
    }
    if (in_mapping && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

TEST(MappedFile, ReleasedPagesAndTheirFaultAroundNeighboursLeaveTheResidentSet) {
  // 64 MiB of text written just now, so all of it is in the page cache: exactly the case in
  // which the kernel maps a fault's neighbours too.
  const std::string path = ::testing::TempDir() + "mapped_file_resident.txt";
  const size_t size = size_t(64) << 20;
  {
    std::ofstream out(path, std::ios::binary);
    const std::string line = "In the beginning God created the heaven and the earth.\n";
    std::string block;
    while (block.size() < (size_t(1) << 20)) block += line;
    block.resize(size_t(1) << 20);
    for (size_t i = 0; i < size >> 20; ++i) out << block;
  }
  auto mapped = map_regular_file(path, "text file", uint64_t(size));
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().message();
  const uint8_t* p = mapped->bytes.get();
  ASSERT_EQ(mapping_rss_kib(p), 0) << "nothing read yet";

  // 256 windows of 300 bytes, one per 256 KiB, each read then released as the loader does.
  uint64_t sum = 0;
  for (size_t k = 0; k < 256; ++k) {
    const uint8_t* w = p + k * (size_t(256) << 10) + 1000;
    for (size_t j = 0; j < 300; ++j) sum += w[j];
    release_pages(w, 300, p, size);
  }
  EXPECT_GT(sum, 0u);
  // Released: at most a few pages (a fault between two releases), not 256 x 64 KiB = 16 MiB.
  const long rss = mapping_rss_kib(p);
  ASSERT_GE(rss, 0) << "the mapping is not in /proc/self/smaps";
  EXPECT_LT(rss, 256) << "KiB of the map still resident after every window was released";
  ::unlink(path.c_str());
}


// The 2 MiB blocks stop at the mapping's ends: a small file mapped between other memory (here
// an anonymous region holding a pattern, with the file mapped over its middle) is released
// without touching its neighbours, which MADV_DONTNEED would zero.
TEST(MappedFile, ReleasingNeverReachesPastTheMapping) {
  const std::string path = ::testing::TempDir() + "mapped_file_small.txt";
  {
    std::ofstream(path, std::ios::binary) << std::string(10000, 'x');
  }
  const size_t region = size_t(8) << 20, page = size_t(::sysconf(_SC_PAGESIZE));
  void* r = ::mmap(nullptr, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(r, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(r);
  for (size_t i = 0; i < region; ++i) bytes[i] = uint8_t(1 + i % 251);
  // The file over the region's pages from 3 MiB + 5 pages on: not 2 MiB-aligned at either end.
  const size_t at = (size_t(3) << 20) + 5 * page;
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* f = ::mmap(bytes + at, 10000, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  ::close(fd);
  ASSERT_EQ(f, static_cast<void*>(bytes + at));
  const auto* file = static_cast<const uint8_t*>(f);
  EXPECT_EQ(file[9999], 'x');
  release_pages(file + 5000, 300, file, 10000);
  EXPECT_EQ(file[5000], 'x');  // faulted in again from the page cache
  const size_t file_end = at + (10000 + page - 1) / page * page;
  size_t wiped = 0;
  for (size_t i = 0; i < region; ++i)
    if ((i < at || i >= file_end) && bytes[i] != uint8_t(1 + i % 251)) ++wiped;
  EXPECT_EQ(wiped, 0u) << "bytes outside the file mapping were erased";
  ::munmap(r, region);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace mixprec::io
