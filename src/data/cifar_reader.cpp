// cifar_reader.cpp: CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin). Each
// record is 1 label byte then 3072 pixel bytes: 1024 red, 1024 green, 1024 blue, each 32x32
// row-major, which is already the CHW layout ImageDataset stores.
#include <cstring>

#include <fmt/format.h>

#include "data/byte_stream.h"
#include "mixprec/data/data.h"

namespace mixprec {
namespace {
constexpr int64_t kSide = 32, kChannels = 3;
constexpr int64_t kPixels = kChannels * kSide * kSide;  // 3072
constexpr int64_t kRecord = 1 + kPixels;                // 3073
constexpr int kClasses = 10;
// Upper bound on one batch file; the real ones are 30,730,000 bytes (10000 records).
constexpr int64_t kMaxFileBytes = kMaxDatasetBytes / 2;
}  // namespace

StatusOr<ImageDataset> read_cifar10_batch(const std::string& path) {
  auto opened = data::ByteStream::open(path);
  if (!opened.is_ok()) return opened.status();
  data::ByteStream& s = *opened.value();
  if (auto size = s.plain_size()) {
    if (*size == 0)
      return Status::data_loss(fmt::format(
          "{}: file is empty: expected CIFAR-10 records of {} bytes", path, kRecord));
    if (*size > kMaxFileBytes)
      return Status::data_loss(fmt::format("{}: file has {} bytes: expected at most {}", path,
                                           *size, kMaxFileBytes));
  }
  std::vector<uint8_t> raw;
  // Ask for one byte past the expected end (the file size, or the limit for gzip): getting
  // it proves the data is too large without inflating the rest.
  const int64_t want = s.plain_size() ? *s.plain_size() + 1 : kMaxFileBytes + 1;
  auto got = s.read_append(raw, size_t(want));
  if (!got.is_ok()) return got.status();
  int64_t size = int64_t(raw.size());
  if (size > kMaxFileBytes)
    return Status::data_loss(fmt::format(
        "{}: decompressed data exceeds {} bytes: expected at most {} bytes for a CIFAR-10 batch",
        path, kMaxFileBytes, kMaxFileBytes));
  if (size == 0)
    return Status::data_loss(fmt::format(
        "{}: no data: expected CIFAR-10 records of {} bytes", path, kRecord));
  if (size % kRecord != 0)
    return Status::data_loss(fmt::format(
        "{}: size {} bytes is not a multiple of the CIFAR-10 record size {} (1 label + {} "
        "pixels): {} whole records and {} bytes left over",
        path, size, kRecord, kPixels, size / kRecord, size % kRecord));

  ImageDataset ds;
  ds.count = size / kRecord;
  ds.channels = kChannels;
  ds.height = kSide;
  ds.width = kSide;
  ds.num_classes = kClasses;
  ds.name = "cifar10";
  ds.source = path;
  ds.labels.resize(size_t(ds.count));
  ds.images.resize(size_t(ds.count * kPixels));
  for (int64_t r = 0; r < ds.count; ++r) {
    const uint8_t* rec = raw.data() + r * kRecord;
    if (rec[0] >= kClasses)
      return Status::data_loss(fmt::format(
          "{}: label {} in record {} ({}) is out of range [0, {})", path, rec[0], r,
          s.offset_str(r * kRecord), kClasses));
    ds.labels[size_t(r)] = rec[0];
    std::memcpy(ds.images.data() + r * kPixels, rec + 1, size_t(kPixels));
  }
  // Per-channel statistics of the CIFAR-10 training set (the values torchvision users use).
  ds.mean = {0.4914, 0.4822, 0.4465};
  ds.stddev = {0.2470, 0.2435, 0.2616};
  return ds;
}

}  // namespace mixprec
