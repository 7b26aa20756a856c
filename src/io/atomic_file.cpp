// io/atomic_file.cpp: the write-temp / fsync / rename / fsync-dir protocol (see the header
// and reference/reliability.md §4.1 for why both fsyncs are needed).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mixprec::io {
namespace {

std::string os_error(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

// The directory holding path ("." for a bare file name), whose entry the rename changes.
std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string temp_path, int fd)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("atomic write: empty file path");
  // The pid keeps two processes saving to the same path from sharing a temp file; O_TRUNC
  // (not O_EXCL) so that a stale temp left by a killed process with a recycled pid is reused.
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd;
  do {
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    return Status::io_error("cannot write '" + path + "': creating temp file '" + temp +
                            "' failed: " + os_error(err));
  }
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, std::move(temp), fd));
}

AtomicFileWriter::~AtomicFileWriter() { abort(); }

void AtomicFileWriter::abort() {
  if (done_) return;
  done_ = true;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
}

Status AtomicFileWriter::fail(const std::string& what, int err) {
  abort();
  return Status::io_error("cannot write '" + path_ + "': " + what + ": " + os_error(err) +
                          " (the previous file, if any, is unchanged)");
}

Status AtomicFileWriter::write(const void* data, size_t n) {
  if (done_) return Status::internal("atomic write '" + path_ + "': write after commit/abort");
  const char* p = static_cast<const char*>(data);
  size_t left = n;
  while (left > 0) {
    const ssize_t w = ::write(fd_, p, left);
    if (w < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return fail("writing temp file '" + temp_path_ + "'", err);
    }
    if (w == 0) return fail("writing temp file '" + temp_path_ + "' made no progress", EIO);
    p += w;
    left -= size_t(w);
  }
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (done_) return Status::internal("atomic write '" + path_ + "': commit after commit/abort");
  // Data before the rename: otherwise the rename may reach the disk first and a power cut
  // leaves a correctly named file full of zeros.
  if (::fsync(fd_) != 0) {
    const int err = errno;
    return fail("fsync of temp file '" + temp_path_ + "'", err);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    return fail("closing temp file '" + temp_path_ + "'", err);
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    return fail("renaming '" + temp_path_ + "' over it", err);
  }
  done_ = true;  // the temp name no longer exists; nothing left to clean up

  // Make the new directory entry durable.
  const std::string dir = parent_dir(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    const int err = errno;
    return Status::io_error(
        "wrote '" + path_ + "' but could not open its directory '" + dir +
        "' to fsync it (the rename may not survive a power cut): " + os_error(err));
  }
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  // Some filesystems refuse fsync on a directory (EINVAL); the rename itself is done.
  if (rc != 0 && err != EINVAL)
    return Status::io_error("wrote '" + path_ + "' but fsync of directory '" + dir +
                            "' failed (the rename may not survive a power cut): " + os_error(err));
  return Status::ok();
}

}  // namespace mixprec::io
