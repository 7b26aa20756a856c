// idx_reader.cpp: the IDX format of MNIST / Fashion-MNIST (big-endian header, then raw
// unsigned bytes). Header fields are validated and the payload size is checked against
// kMaxDatasetBytes before a byte of it is allocated; then exactly the promised bytes are
// read and the file must end there.
#include <fmt/format.h>

#include "data/byte_stream.h"
#include "mixprec/data/data.h"

namespace mixprec {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // 0x08 = unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // 0x08 = unsigned byte, 1 dimension

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string describe_magic(uint32_t magic) {
  if (magic == kImagesMagic) return "an IDX image file";
  if (magic == kLabelsMagic) return "an IDX label file";
  if ((magic >> 16) == 0) return fmt::format("IDX type 0x{:02x} with {} dims", (magic >> 8) & 0xff, magic & 0xff);
  return "not an IDX file";
}

// Reads the fixed-size header; distinguishes empty, wrong-magic and short files, in that
// order, so that a label file passed as images says "bad magic" rather than "truncated".
Status read_header(data::ByteStream& s, uint8_t* header, size_t header_bytes, uint32_t magic,
                   const char* what) {
  auto got = s.read(header, header_bytes);
  if (!got.is_ok()) return got.status();
  size_t n = got.value();
  if (n == 0)
    return Status::data_loss(fmt::format("{}: file is empty: expected a {}-byte IDX {} header",
                                         s.path(), header_bytes, what));
  if (n >= 4 && be32(header) != magic)
    return Status::data_loss(fmt::format(
        "{}: bad magic number 0x{:08x} at byte offset 0: expected 0x{:08x} (IDX {}), got {}",
        s.path(), be32(header), magic, what, describe_magic(be32(header))));
  if (n < header_bytes)
    return Status::data_loss(fmt::format("{}: truncated header: expected {} bytes, got {}",
                                         s.path(), header_bytes, n));
  return Status::ok();
}

// The payload of `payload_bytes` after a header of `header_bytes`: a plain file's size is
// checked up front; a gzip stream is read until it delivers the bytes or runs dry.
Status read_payload(data::ByteStream& s, int64_t header_bytes, int64_t payload_bytes,
                    const std::string& claim, std::vector<uint8_t>& out) {
  int64_t expected_total = header_bytes + payload_bytes;
  if (auto size = s.plain_size(); size && *size < expected_total)
    return Status::data_loss(fmt::format(
        "{}: truncated data: header claims {} ({} bytes in total), file has {} bytes", s.path(),
        claim, expected_total, *size));
  auto got = s.read_append(out, size_t(payload_bytes));
  if (!got.is_ok()) return got.status();
  if (int64_t(got.value()) < payload_bytes)
    return Status::data_loss(fmt::format(
        "{}: truncated data: header claims {} ({} bytes in total), data ends at {}", s.path(),
        claim, expected_total, s.offset_str(header_bytes + int64_t(got.value()))));
  auto end = s.at_end();
  if (!end.is_ok()) return end.status();
  if (!end.value()) {
    std::string actual = s.plain_size() ? fmt::format("the file has {} bytes", *s.plain_size())
                                         : std::string("the decompressed data goes on");
    return Status::data_loss(fmt::format(
        "{}: trailing bytes after {}: expected end of file after {}, but {}", s.path(),
        s.offset_str(expected_total), claim, actual));
  }
  return Status::ok();
}

}  // namespace

StatusOr<IdxImages> read_idx_images(const std::string& path) {
  auto opened = data::ByteStream::open(path);
  if (!opened.is_ok()) return opened.status();
  data::ByteStream& s = *opened.value();
  uint8_t h[16];
  MIXPREC_RETURN_IF_ERROR(read_header(s, h, sizeof h, kImagesMagic, "unsigned-byte 3-D images"));
  IdxImages out;
  out.count = be32(h + 4);
  out.rows = be32(h + 8);
  out.cols = be32(h + 12);
  if (out.count == 0)
    return Status::data_loss(fmt::format(
        "{}: image count 0 at byte offset 4: expected at least 1 image", path));
  if (out.rows < 1 || out.rows > kMaxImageSide)
    return Status::data_loss(fmt::format(
        "{}: image rows {} at byte offset 8: expected 1..{}", path, out.rows, kMaxImageSide));
  if (out.cols != out.rows)
    return Status::data_loss(fmt::format(
        "{}: image cols {} at byte offset 12: expected square images (cols == rows == {})",
        path, out.cols, out.rows));
  // rows <= 1024 and count < 2^32, so the product fits in int64 without overflow.
  int64_t payload = out.count * out.rows * out.cols;
  if (payload > kMaxDatasetBytes)
    return Status::data_loss(fmt::format(
        "{}: header claims {} images of {}x{} = {} bytes: expected at most {} bytes", path,
        out.count, out.rows, out.cols, payload, kMaxDatasetBytes));
  std::string claim = fmt::format("{} image{} of {}x{}", out.count, out.count == 1 ? "" : "s",
                                  out.rows, out.cols);
  MIXPREC_RETURN_IF_ERROR(read_payload(s, sizeof h, payload, claim, out.pixels));
  return out;
}

StatusOr<std::vector<uint8_t>> read_idx_labels(const std::string& path, int num_classes) {
  if (num_classes < 1 || num_classes > 256)
    return Status::invalid_argument(fmt::format(
        "read_idx_labels({}): num_classes {}: expected 1..256", path, num_classes));
  auto opened = data::ByteStream::open(path);
  if (!opened.is_ok()) return opened.status();
  data::ByteStream& s = *opened.value();
  uint8_t h[8];
  MIXPREC_RETURN_IF_ERROR(read_header(s, h, sizeof h, kLabelsMagic, "unsigned-byte 1-D labels"));
  int64_t count = be32(h + 4);
  if (count == 0)
    return Status::data_loss(fmt::format(
        "{}: label count 0 at byte offset 4: expected at least 1 label", path));
  if (count > kMaxDatasetBytes)
    return Status::data_loss(fmt::format("{}: header claims {} labels: expected at most {}",
                                         path, count, kMaxDatasetBytes));
  std::vector<uint8_t> labels;
  MIXPREC_RETURN_IF_ERROR(read_payload(s, sizeof h, count, fmt::format("{} label{}", count, count == 1 ? "" : "s"), labels));
  for (int64_t i = 0; i < count; ++i) {
    if (labels[size_t(i)] >= num_classes)
      return Status::data_loss(fmt::format(
          "{}: label {} at index {} ({}) is out of range [0, {})", path, labels[size_t(i)], i,
          s.offset_str(int64_t(sizeof h) + i), num_classes));
  }
  return labels;
}

}  // namespace mixprec
