// io/byte_source.h: random-access reads of exactly n bytes from a file or a memory buffer, so
// the safetensors reader runs the same validation on disk files and on in-memory bytes
// (tests, fuzzing). A read past the end is data_loss (the file is shorter than its header
// said), never a silent short read.
//
// Files are opened through open_regular_file (mixprec/io/files.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mixprec/io/files.h"
#include "mixprec/core/status.h"

namespace mixprec::io {

// A regular file opened (open_regular_file) with its size, refused as data_loss without being
// read when it is larger than max_bytes; on an error the descriptor is already closed.
// read_regular_file and map_regular_file both start here.
struct SizedFile {
  int fd = -1;
  uint64_t size = 0;
};
StatusOr<SizedFile> open_regular_file_within(const std::string& path, const std::string& what, uint64_t max_bytes);

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Exactly n bytes from offset into dst.
  virtual Status read_at(uint64_t offset, void* dst, size_t n) = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size, std::string name)
      : data_(data), size_(size), name_(std::move(name)) {}
  uint64_t size() const override { return size_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override;

 private:
  const uint8_t* data_;
  size_t size_;
  std::string name_;
};

class FileSource : public ByteSource {
 public:
  // not_found when path does not exist; data_loss when it is not a regular file, io_error
  // when it cannot be opened (open_regular_file).
  static StatusOr<std::unique_ptr<FileSource>> open(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  uint64_t size() const override { return size_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override;

 private:
  FileSource(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  uint64_t size_;  // at open; a file that shrinks later gives data_loss on read
};

}  // namespace mixprec::io
