// byte_stream.cpp: plain / gzip file reading for the dataset readers. zlib's inflate (not
// gzread) so that every failure has a precise message: truncated stream, corrupt block,
// CRC mismatch, or bytes after the gzip stream that are not another gzip member.
#include "data/byte_stream.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "io/byte_source.h"

namespace mixprec::data {
namespace {
constexpr size_t kInBufBytes = size_t(256) << 10;
// read_append grows its output by at most this much before the bytes have arrived: the
// bytes delivered so far (doubling), at least kAppendFirst, at most kAppendChunk. So memory
// stays within 2x of what the stream really delivered (+64 KiB), and a reader that asks for
// "up to the limit" does not zero-fill 16 MiB for a 3 KiB file (the CIFAR fuzz harness ran at
// 25 inputs/s on that).
constexpr size_t kAppendFirst = size_t(64) << 10;
constexpr size_t kAppendChunk = size_t(16) << 20;
}  // namespace

struct ByteStream::Gzip {
  z_stream z{};
  bool initialised = false;
  ~Gzip() {
    if (initialised) inflateEnd(&z);
  }
};

ByteStream::ByteStream(std::string path) : path_(std::move(path)) {}

ByteStream::~ByteStream() {
  gzip_.reset();
  if (file_ != nullptr) std::fclose(file_);
}

StatusOr<std::unique_ptr<ByteStream>> ByteStream::open(const std::string& path) {
  // Opened without blocking and checked on the descriptor: a FIFO or a device (/dev/zero)
  // could block or never end (io/byte_source.h).
  auto fd = io::open_regular_file(path, "data file");
  if (!fd.is_ok()) {
    if (fd.status().code() == StatusCode::not_found)
      return Status::not_found(fmt::format("{}: no such file", path));
    return fd.status();
  }
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return Status::io_error(fmt::format("{}: cannot stat: {}", path, std::strerror(err)));
  }
  std::unique_ptr<ByteStream> s(new ByteStream(path));
  s->file_ = ::fdopen(*fd, "rb");
  if (s->file_ == nullptr) {
    const int err = errno;
    ::close(*fd);
    return Status::io_error(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  s->file_size_ = int64_t(st.st_size);
  // No bigger than the file: a small file (a test's, a fuzz input) costs no 256 KiB buffer.
  s->in_buf_.resize(std::min<size_t>(kInBufBytes, size_t(st.st_size) + 1));
  MIXPREC_RETURN_IF_ERROR(s->fill_input());
  // gzip is recognised by its magic bytes; a plain file starting with 1f 8b would be an
  // IDX file with a nonsense magic anyway.
  if (s->in_len_ >= 2 && s->in_buf_[0] == 0x1f && s->in_buf_[1] == 0x8b) {
    s->gzip_ = std::make_unique<Gzip>();
    // 15 + 16: maximum window, expect a gzip wrapper (header + CRC32 + ISIZE trailer).
    if (inflateInit2(&s->gzip_->z, 15 + 16) != Z_OK)
      return Status::internal(fmt::format("{}: zlib inflateInit2 failed", path));
    s->gzip_->initialised = true;
  }
  return s;
}

std::optional<int64_t> ByteStream::plain_size() const {
  if (gzip_) return std::nullopt;
  return file_size_;
}

std::string ByteStream::offset_str(int64_t offset) const {
  return gzip_ ? fmt::format("byte offset {} of the decompressed data", offset)
               : fmt::format("byte offset {}", offset);
}

Status ByteStream::io_failure(const char* what) const {
  return Status::io_error(fmt::format("{}: {} failed: {}", path_, what, std::strerror(errno)));
}

Status ByteStream::fill_input() {
  in_pos_ = 0;
  in_len_ = 0;
  if (file_eof_) return Status::ok();
  size_t got = std::fread(in_buf_.data(), 1, in_buf_.size(), file_);
  if (got < in_buf_.size()) {
    if (std::ferror(file_)) return io_failure("read");
    file_eof_ = true;
  }
  in_len_ = got;
  file_consumed_ += int64_t(got);
  return Status::ok();
}

StatusOr<size_t> ByteStream::read(void* dst, size_t n) {
  auto r = gzip_ ? read_inflated(dst, n) : read_raw(dst, n);
  if (r.is_ok()) position_ += int64_t(r.value());
  return r;
}

StatusOr<size_t> ByteStream::read_raw(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    if (in_pos_ < in_len_) {
      size_t k = std::min(n - done, in_len_ - in_pos_);
      std::memcpy(out + done, in_buf_.data() + in_pos_, k);
      in_pos_ += k;
      done += k;
      continue;
    }
    if (file_eof_) break;
    if (n - done >= in_buf_.size()) {  // large request: skip the bounce buffer
      size_t got = std::fread(out + done, 1, n - done, file_);
      if (got < n - done) {
        if (std::ferror(file_)) return io_failure("read");
        file_eof_ = true;
      }
      file_consumed_ += int64_t(got);
      done += got;
      continue;
    }
    MIXPREC_RETURN_IF_ERROR(fill_input());
  }
  return done;
}

StatusOr<size_t> ByteStream::read_inflated(void* dst, size_t n) {
  z_stream& z = gzip_->z;
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  auto compressed_offset = [&] { return file_consumed_ - int64_t(in_len_ - in_pos_); };
  while (done < n) {
    if (in_pos_ == in_len_ && !file_eof_) MIXPREC_RETURN_IF_ERROR(fill_input());
    if (stream_end_) {
      if (in_pos_ == in_len_) break;  // clean end of the last member
      // Concatenated gzip members are valid gzip (gzip -c a b); anything else is not.
      if (in_buf_[in_pos_] != 0x1f)
        return Status::data_loss(fmt::format(
            "{}: trailing bytes after the gzip stream at compressed byte offset {}: expected "
            "end of file or another gzip member (1f 8b), got byte 0x{:02x}",
            path_, compressed_offset(), in_buf_[in_pos_]));
      if (inflateReset(&z) != Z_OK)
        return Status::internal(fmt::format("{}: zlib inflateReset failed", path_));
      stream_end_ = false;
    }
    size_t avail_before = in_len_ - in_pos_;
    size_t want = std::min<size_t>(n - done, UINT_MAX);
    z.next_in = in_buf_.data() + in_pos_;
    z.avail_in = uInt(avail_before);
    z.next_out = out + done;
    z.avail_out = uInt(want);
    int ret = inflate(&z, Z_NO_FLUSH);
    size_t consumed = avail_before - z.avail_in;
    size_t produced = want - z.avail_out;
    in_pos_ += consumed;
    done += produced;
    if (ret == Z_STREAM_END) {
      stream_end_ = true;
      continue;
    }
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR) {
      // No progress possible: zlib wants input and the file has none left.
      if (consumed == 0 && produced == 0 && in_pos_ == in_len_ && file_eof_)
        return Status::data_loss(fmt::format(
            "{}: truncated gzip stream: the compressed file ends at byte {} before the end of "
            "the stream ({} bytes decompressed so far)",
            path_, file_consumed_, position_ + int64_t(done)));
      continue;
    }
    if (ret == Z_MEM_ERROR)
      return Status::internal(fmt::format("{}: zlib ran out of memory", path_));
    return Status::data_loss(fmt::format(
        "{}: corrupt gzip data near compressed byte offset {} (decompressed byte {}): {}",
        path_, compressed_offset(), position_ + int64_t(done),
        z.msg != nullptr ? z.msg : "zlib error"));
  }
  return done;
}

StatusOr<size_t> ByteStream::read_append(std::vector<uint8_t>& out, size_t n) {
  size_t done = 0;
  while (done < n) {
    size_t k = std::min({n - done, kAppendChunk, std::max(kAppendFirst, done)});
    size_t old = out.size();
    out.resize(old + k);
    auto r = read(out.data() + old, k);
    if (!r.is_ok()) {
      out.resize(old);
      return r.status();
    }
    out.resize(old + r.value());
    done += r.value();
    if (r.value() < k) break;  // end of data
  }
  return done;
}

StatusOr<bool> ByteStream::at_end() {
  uint8_t byte = 0;
  auto r = read(&byte, 1);
  if (!r.is_ok()) return r.status();
  return r.value() == 0;
}

}  // namespace mixprec::data
