// byte_stream.h: sequential reads from a plain or gzip-compressed file, the format chosen by
// the first two bytes (1f 8b), never by the file name. Readers pull exactly the bytes a
// validated header promised, so a gzip bomb is never inflated past that point.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::data {

class ByteStream {
 public:
  // not_found when the file does not exist, data_loss when it is not a regular file (a FIFO,
  // a directory, a device), io_error when it cannot be opened.
  static StatusOr<std::unique_ptr<ByteStream>> open(const std::string& path);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Reads up to n bytes into dst; returns fewer only at the end of the data. Errors:
  // io_error (the OS refused), data_loss (corrupt or truncated gzip stream).
  StatusOr<size_t> read(void* dst, size_t n);
  // Reads exactly n bytes, appending to out; a short read returns the count read so far
  // (the caller words the "truncated" message). Grows out in doubling chunks (64 KiB up to
  // 16 MiB), so a header that over-claims costs at most twice the memory the file delivers.
  StatusOr<size_t> read_append(std::vector<uint8_t>& out, size_t n);
  // True when no byte follows (consumes at most one byte to find out).
  StatusOr<bool> at_end();

  const std::string& path() const { return path_; }
  bool compressed() const { return gzip_ != nullptr; }
  // Size of a plain file on disk; nullopt for gzip (unknown until inflated).
  std::optional<int64_t> plain_size() const;
  // Bytes delivered so far (offsets in the decompressed data for gzip).
  int64_t position() const { return position_; }
  // "byte offset 11" or "byte offset 11 of the decompressed data" for messages.
  std::string offset_str(int64_t offset) const;

 private:
  explicit ByteStream(std::string path);  // out of line: Gzip is incomplete here
  StatusOr<size_t> read_raw(void* dst, size_t n);      // from the file, through in_buf_
  StatusOr<size_t> read_inflated(void* dst, size_t n);  // through zlib
  Status fill_input();                                    // refills in_buf_ from the file
  Status io_failure(const char* what) const;

  struct Gzip;
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t file_size_ = 0;
  std::vector<uint8_t> in_buf_;
  size_t in_pos_ = 0, in_len_ = 0;  // unread window of in_buf_
  int64_t file_consumed_ = 0;       // bytes fetched from the file into in_buf_ so far
  bool file_eof_ = false;
  std::unique_ptr<Gzip> gzip_;
  bool stream_end_ = false;  // gzip: the last member ended cleanly
  int64_t position_ = 0;
};

}  // namespace mixprec::data
