// io/byte_source.cpp: pread-based file reads and bounds-checked memory reads.
#include "io/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mixprec::io {
namespace {

Status past_end(const std::string& name, uint64_t offset, size_t n, uint64_t got) {
  return Status::data_loss("'" + name + "': file ended while reading " + std::to_string(n) +
                           " bytes at offset " + std::to_string(offset) + " (got " +
                           std::to_string(got) + "; truncated?)");
}

}  // namespace

Status MemorySource::read_at(uint64_t offset, void* dst, size_t n) {
  if (offset > size_ || n > size_ - offset)
    return past_end(name_, offset, n, offset > size_ ? 0 : size_ - offset);
  if (n > 0) std::memcpy(dst, data_ + offset, n);
  return Status::ok();
}

StatusOr<std::unique_ptr<FileSource>> FileSource::open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = "cannot open '" + path + "': " + std::strerror(err);
    return err == ENOENT ? Status::not_found(msg) : Status::io_error(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::io_error("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::io_error("cannot read '" + path + "': not a regular file");
  }
  return std::unique_ptr<FileSource>(new FileSource(path, fd, uint64_t(st.st_size)));
}

FileSource::~FileSource() { ::close(fd_); }

Status FileSource::read_at(uint64_t offset, void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, n - done, off_t(offset + done));
    if (r < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return Status::io_error("reading '" + path_ + "' at offset " + std::to_string(offset + done) +
                              ": " + std::strerror(err));
    }
    if (r == 0) return past_end(path_, offset, n, done);
    done += size_t(r);
  }
  return Status::ok();
}

}  // namespace mixprec::io
