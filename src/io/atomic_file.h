// io/atomic_file.h: replace a file all-or-nothing. Bytes go to "<path>.tmp.<pid>" in the same
// directory (rename is atomic only within one filesystem); commit() fsyncs the data, renames
// over path and fsyncs the directory, so neither a crash nor a power cut leaves a half-written
// or zero-filled file under the final name. Without commit() the temp file is removed.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "mixprec/core/status.h"

namespace mixprec::io {

class AtomicFileWriter {
 public:
  // Creates (truncates) the temp file. io_error naming it and strerror on failure.
  static StatusOr<std::unique_ptr<AtomicFileWriter>> create(const std::string& path);
  ~AtomicFileWriter();  // not committed: closes and unlinks the temp file
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Writes all n bytes (retrying short writes and EINTR).
  Status write(const void* data, size_t n);
  // fsync, close, rename over the final path, fsync the directory. After a failure the temp
  // file is gone and the final path untouched (unless only the directory fsync failed: the
  // rename has then happened but may not be durable, which the message says).
  Status commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  AtomicFileWriter(std::string path, std::string temp_path, int fd);
  Status fail(const std::string& what, int err);  // aborts and words the error
  void abort();

  std::string path_, temp_path_;
  int fd_ = -1;
  bool done_ = false;  // committed or aborted
};

}  // namespace mixprec::io
