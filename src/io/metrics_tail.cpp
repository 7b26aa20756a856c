// io/metrics_tail.cpp: the lines a live run appended to its metrics.jsonl since the last look
// (read_new_lines, run_index.h). A dashboard polls each run every second or two, so a poll
// reads only the bytes after the offset it was given: never the whole file again. MetricsLog
// writes one line per fwrite + fflush, so a reader can see a line half written: only lines
// ending in '\n' are returned, and the offset stays at the start of the partial one.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "mixprec/io/files.h"
#include "mixprec/io/run_index.h"

namespace mixprec::runs {

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Exactly n bytes at offset (a file that shrank under us reads short: data_loss).
Status read_exact(int fd, uint64_t offset, char* dst, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, dst + done, n - done, off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::io_error("metrics log '" + path + "': read failed: " + std::strerror(errno));
    if (r == 0) return Status::data_loss("metrics log '" + path + "': shrank while being read");
    done += size_t(r);
  }
  return Status::ok();
}

}  // namespace

StatusOr<NewLines> read_new_lines(const std::string& path, uint64_t from, const std::string& file_id,
                                  uint64_t max_bytes) {
  auto opened = io::open_regular_file(path, "metrics log");
  if (!opened.is_ok()) return opened.status();
  Fd fd(*opened);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Status::io_error("metrics log '" + path + "': " + std::strerror(errno));
  NewLines out;
  out.size = uint64_t(st.st_size);
  out.file_id = std::to_string(uint64_t(st.st_dev)) + ":" + std::to_string(uint64_t(st.st_ino));
  // Restart from the top when the offset cannot continue this file: another file now (a
  // resume rewrote the log), an offset past the end (truncated), or one inside a line (not
  // an offset this function returned).
  bool restart = (!file_id.empty() && file_id != out.file_id) || from > out.size;
  if (!restart && from > 0) {
    char before = 0;
    MIXPREC_RETURN_IF_ERROR(read_exact(fd.get(), from - 1, &before, 1, path));
    restart = before != '\n';
  }
  if (restart) {
    out.reset = true;
    from = 0;
  }
  out.offset = from;
  const uint64_t available = out.size - from;
  const size_t n = size_t(std::min<uint64_t>(available, max_bytes));
  if (n == 0) return out;
  std::string bytes(n, '\0');
  MIXPREC_RETURN_IF_ERROR(read_exact(fd.get(), from, bytes.data(), n, path));
  const size_t last_newline = bytes.rfind('\n');
  if (last_newline == std::string::npos) {
    if (n == max_bytes && available > max_bytes)
      return Status::data_loss("metrics log '" + path + "': the line at byte " + std::to_string(from) +
                               " is longer than " + std::to_string(max_bytes) + " bytes");
    return out;  // only a partial line so far
  }
  size_t start = 0;
  while (start <= last_newline) {
    const size_t nl = bytes.find('\n', start);
    out.lines.push_back(bytes.substr(start, nl - start));
    start = nl + 1;
  }
  out.offset = from + last_newline + 1;
  out.more = available > max_bytes;
  return out;
}

}  // namespace mixprec::runs
