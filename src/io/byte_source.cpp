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

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

StatusOr<int> open_regular_file(const std::string& path, const std::string& what) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = "cannot open " + what + " '" + path + "': " + std::strerror(err);
    return err == ENOENT || err == ENOTDIR ? Status::not_found(msg) : Status::io_error(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::io_error("cannot stat " + what + " '" + path + "': " + std::strerror(err));
  }
  // The wrong kind of file is a problem with the input (data_loss: exit code 3 for a dataset,
  // 4 for a checkpoint), not an OS failure (io_error, exit code 1).
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::data_loss("cannot read " + what + " '" + path + "': it is " +
                             file_kind(st.st_mode) + ", not a regular file");
  }
  // Back to blocking reads: O_NONBLOCK has no effect on regular files today, but no reader
  // should depend on that.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::io_error("cannot read " + what + " '" + path + "': fcntl: " + std::strerror(err));
  }
  return fd;
}

StatusOr<SizedFile> open_regular_file_within(const std::string& path, const std::string& what, uint64_t max_bytes) {
  auto fd = open_regular_file(path, what);
  if (!fd.is_ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return Status::io_error("cannot stat " + what + " '" + path + "': " + std::strerror(err));
  }
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(*fd);
    return Status::data_loss(what + " '" + path + "': " + std::to_string(st.st_size) +
                             " bytes, expected at most " + std::to_string(max_bytes));
  }
  return SizedFile{*fd, uint64_t(st.st_size)};
}

StatusOr<std::string> read_regular_file(const std::string& path, const std::string& what,
                                        uint64_t max_bytes) {
  // The size is known before reading: a file over the limit is refused without reading it (a
  // 1 GiB text dataset used to be read whole first). The loop below still stops at the limit,
  // for a file that grows while it is read.
  auto opened = open_regular_file_within(path, what, max_bytes);
  if (!opened.is_ok()) return opened.status();
  const int fd = opened->fd;
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      ::close(fd);
      return Status::io_error("reading " + what + " '" + path + "': " + std::strerror(err));
    }
    if (r == 0) break;
    if (uint64_t(r) > max_bytes - text.size()) {
      ::close(fd);
      return Status::data_loss(what + " '" + path + "': more than " + std::to_string(max_bytes) +
                               " bytes, expected at most " + std::to_string(max_bytes));
    }
    text.append(buf, size_t(r));
  }
  ::close(fd);
  return text;
}

StatusOr<std::unique_ptr<FileSource>> FileSource::open(const std::string& path) {
  auto fd = open_regular_file(path, "file");
  if (!fd.is_ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return Status::io_error("cannot stat '" + path + "': " + std::strerror(err));
  }
  return std::unique_ptr<FileSource>(new FileSource(path, *fd, uint64_t(st.st_size)));
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
