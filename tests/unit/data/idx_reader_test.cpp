// idx_reader_test.cpp: IDX images/labels, plain and gzip, valid and corrupt. Every corrupt
// case checks the Status code and that the message names the file and the expected and
// actual values, against fixtures written byte by byte here.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <chrono>
#include <random>

#include "mixprec/data/data.h"
#include "data_test_util.h"

namespace mixprec {
namespace {
using testing_data::Bytes;
using testing_data::TempDir;

// Expects a failure with `code` whose message contains every one of `parts`.
template <typename T>
void expect_error(const StatusOr<T>& r, StatusCode code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.is_ok()) << "expected an error containing " << *parts.begin();
  EXPECT_EQ(int(r.status().code()), int(code)) << r.status().message();
  for (const auto& p : parts)
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "missing \"" << p << "\" in: " << r.status().message();
}

TEST(DataIdx, PlainImagesRoundTrip) {
  TempDir dir;
  Bytes pixels = testing_data::pattern_pixels(3 * 4 * 4);
  auto path = dir.write("train-images-idx3-ubyte", testing_data::idx_images(3, 4, 4, pixels));
  auto r = read_idx_images(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().count, 3);
  EXPECT_EQ(r.value().rows, 4);
  EXPECT_EQ(r.value().cols, 4);
  EXPECT_EQ(r.value().pixels, pixels);
}

TEST(DataIdx, PlainLabelsRoundTrip) {
  TempDir dir;
  Bytes labels = {0, 9, 3, 7, 1};
  auto r = read_idx_labels(dir.write("l", testing_data::idx_labels(labels)));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), labels);
}

TEST(DataIdx, GzipRoundTripAcrossStoredBlocks) {
  TempDir dir;
  // 5 x 128 x 128 = 81920 pixel bytes: more than one 65535-byte stored block.
  Bytes pixels = testing_data::pattern_pixels(5 * 128 * 128);
  auto path = dir.write("imgs.gz", testing_data::gzip_stored(testing_data::idx_images(5, 128, 128, pixels)));
  auto r = read_idx_images(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().count, 5);
  EXPECT_EQ(r.value().rows, 128);
  EXPECT_EQ(r.value().pixels, pixels);

  Bytes labels = {4, 4, 0, 2};
  auto l = read_idx_labels(dir.write("labels.gz", testing_data::gzip_stored(testing_data::idx_labels(labels))));
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l.value(), labels);
}

TEST(DataIdx, FormatIsDetectedByMagicBytesNotByName) {
  TempDir dir;
  Bytes pixels = testing_data::pattern_pixels(2 * 3 * 3);
  Bytes idx = testing_data::idx_images(2, 3, 3, pixels);
  auto gz_no_suffix = read_idx_images(dir.write("compressed-idx3-ubyte", testing_data::gzip_stored(idx)));
  ASSERT_TRUE(gz_no_suffix.is_ok()) << gz_no_suffix.status().message();
  EXPECT_EQ(gz_no_suffix.value().pixels, pixels);
  auto plain_with_suffix = read_idx_images(dir.write("plain-idx3-ubyte.gz", idx));
  ASSERT_TRUE(plain_with_suffix.is_ok()) << plain_with_suffix.status().message();
  EXPECT_EQ(plain_with_suffix.value().pixels, pixels);
}

TEST(DataIdx, ConcatenatedGzipMembersAreOneStream) {
  TempDir dir;
  Bytes pixels = testing_data::pattern_pixels(4 * 2 * 2);
  Bytes idx = testing_data::idx_images(4, 2, 2, pixels);
  Bytes first(idx.begin(), idx.begin() + 10), second(idx.begin() + 10, idx.end());
  Bytes gz = testing_data::gzip_stored(first), gz2 = testing_data::gzip_stored(second);
  gz.insert(gz.end(), gz2.begin(), gz2.end());
  auto r = read_idx_images(dir.write("two-members", gz));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().pixels, pixels);
}

TEST(DataIdx, BadMagicNamesBothValues) {
  TempDir dir;
  // A label file handed to the image reader.
  auto path = dir.write("train-labels-idx1-ubyte", testing_data::idx_labels({1, 2, 3}));
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "bad magic", "0x00000801", "expected 0x00000803", "IDX label file"});
  auto junk = dir.write("junk", Bytes{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  expect_error(read_idx_images(junk), StatusCode::data_loss,
               {junk, "0x504b0304", "expected 0x00000803", "byte offset 0"});
  expect_error(read_idx_labels(junk), StatusCode::data_loss, {junk, "expected 0x00000801"});
}

TEST(DataIdx, WrongDimsAreRejected) {
  TempDir dir;
  auto zero = dir.write("zero", testing_data::idx_images(1, 0, 0, {}));
  expect_error(read_idx_images(zero), StatusCode::data_loss, {zero, "rows 0", "byte offset 8", "1..1024"});
  auto big = dir.write("big", testing_data::idx_images(1, 2000, 2000, {}));
  expect_error(read_idx_images(big), StatusCode::data_loss, {big, "rows 2000", "1..1024"});
  auto nonsquare = dir.write("nonsquare", testing_data::idx_images(1, 28, 27, Bytes(28 * 27)));
  expect_error(read_idx_images(nonsquare), StatusCode::data_loss,
               {nonsquare, "cols 27", "byte offset 12", "cols == rows == 28"});
  auto no_images = dir.write("none", testing_data::idx_images(0, 28, 28, {}));
  expect_error(read_idx_images(no_images), StatusCode::data_loss, {no_images, "image count 0", "at least 1"});
}

TEST(DataIdx, HugeClaimedSizeIsRejectedBeforeAllocating) {
  TempDir dir;
  // 4294967295 images of 1024x1024 = 4.5e15 bytes claimed by a 16-byte file.
  auto path = dir.write("huge", testing_data::idx_images(0xFFFFFFFFu, 1024, 1024, {}));
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "4294967295 images of 1024x1024", "4503599626321920 bytes", "at most 1073741824"});
  Bytes l = testing_data::idx_labels({});
  l[4] = l[5] = l[6] = l[7] = 0xFF;  // count 4294967295
  auto labels = dir.write("huge-labels", l);
  expect_error(read_idx_labels(labels), StatusCode::data_loss, {labels, "4294967295 labels", "at most"});
}

TEST(DataIdx, TruncatedHeader) {
  TempDir dir;
  Bytes h = testing_data::idx_images(1, 2, 2, {});
  auto path = dir.write("short", Bytes(h.begin(), h.begin() + 7));
  expect_error(read_idx_images(path), StatusCode::data_loss, {path, "truncated header", "expected 16 bytes, got 7"});
  auto gz = dir.write("short.gz", testing_data::gzip_stored(Bytes(h.begin(), h.begin() + 7)));
  expect_error(read_idx_images(gz), StatusCode::data_loss, {gz, "expected 16 bytes, got 7"});
}

TEST(DataIdx, TruncatedDataPlain) {
  TempDir dir;
  Bytes full = testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48));
  auto path = dir.write("cut", Bytes(full.begin(), full.begin() + 50));
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "truncated data", "3 images of 4x4", "64 bytes in total", "file has 50 bytes"});
}

TEST(DataIdx, TruncatedDataInsideValidGzip) {
  TempDir dir;
  Bytes full = testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48));
  auto path = dir.write("cut.gz", testing_data::gzip_stored(Bytes(full.begin(), full.begin() + 50)));
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "truncated data", "64 bytes in total", "byte offset 50 of the decompressed data"});
}

TEST(DataIdx, TruncatedGzipStream) {
  TempDir dir;
  Bytes gz = testing_data::gzip_stored(testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48)));
  auto path = dir.write("cut-stream.gz", Bytes(gz.begin(), gz.begin() + 40));
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "truncated gzip stream", "ends at byte 40"});
}

TEST(DataIdx, CorruptGzipChecksum) {
  TempDir dir;
  Bytes gz = testing_data::gzip_stored(testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48)));
  gz[gz.size() - 8] ^= 0xFF;  // first CRC32 byte of the trailer
  auto path = dir.write("bad-crc.gz", gz);
  expect_error(read_idx_images(path), StatusCode::data_loss, {path, "corrupt gzip data", "incorrect data check"});
}

TEST(DataIdx, CorruptGzipBlockHeader) {
  TempDir dir;
  Bytes gz = testing_data::gzip_stored(testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48)));
  gz[10] = 0x07;  // BFINAL=1, BTYPE=11: reserved
  auto path = dir.write("bad-block.gz", gz);
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "corrupt gzip data", "compressed byte offset", "invalid block type"});
}

TEST(DataIdx, TrailingBytesPlain) {
  TempDir dir;
  Bytes b = testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48));
  b.push_back(0);
  auto path = dir.write("long", b);
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "trailing bytes after byte offset 64", "3 images of 4x4", "file has 65 bytes"});
  Bytes l = testing_data::idx_labels({1, 2});
  l.push_back(1);
  auto lpath = dir.write("long-labels", l);
  expect_error(read_idx_labels(lpath), StatusCode::data_loss,
               {lpath, "trailing bytes after byte offset 10", "2 labels", "file has 11 bytes"});
}

TEST(DataIdx, TrailingBytesInsideGzip) {
  TempDir dir;
  Bytes b = testing_data::idx_images(3, 4, 4, testing_data::pattern_pixels(48));
  b.push_back(0);
  auto path = dir.write("long.gz", testing_data::gzip_stored(b));
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "trailing bytes after byte offset 64 of the decompressed data"});
}

TEST(DataIdx, GarbageAfterGzipStream) {
  TempDir dir;
  Bytes gz = testing_data::gzip_stored(testing_data::idx_images(1, 2, 2, {1, 2, 3, 4}));
  size_t end = gz.size();
  gz.push_back(0x42);
  auto path = dir.write("garbage.gz", gz);
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "trailing bytes after the gzip stream", "compressed byte offset " + std::to_string(end), "0x42"});
}

TEST(DataIdx, GzipBombStopsAtTheClaimedSize) {
  TempDir dir;
  // Sanity check of the hand-made fixed-Huffman encoder: 9 literal pixels + 775 zeros
  // = one 28x28 image, exactly.
  Bytes header = testing_data::idx_images(1, 28, 28, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto exact = read_idx_images(dir.write("exact.gz", testing_data::gzip_zero_bomb(header, 3)));
  ASSERT_TRUE(exact.is_ok()) << exact.status().message();
  EXPECT_EQ(exact.value().pixels[8], 9);
  EXPECT_EQ(exact.value().pixels[783], 0);

  // The same header followed by ~1.08 GB of zeros in a ~7 MB file, with a wrong CRC: the
  // reader must stop after the 784 promised pixels plus one byte, so it reports trailing
  // bytes (not the checksum error at the very end) and its peak memory barely moves.
  auto path = dir.write("bomb.gz", testing_data::gzip_zero_bomb(header, 4200000, false));
  struct rusage before {}, after {};
  getrusage(RUSAGE_SELF, &before);
  auto t0 = std::chrono::steady_clock::now();
  expect_error(read_idx_images(path), StatusCode::data_loss,
               {path, "trailing bytes after byte offset 800 of the decompressed data", "1 image of 28x28"});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  getrusage(RUSAGE_SELF, &after);
  // ru_maxrss is in KiB; inflating the bomb into memory would add ~1 GB.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024);
  // Inflating 1 GB takes seconds; reading 800 bytes takes microseconds. 1 s absorbs noise.
  EXPECT_LT(secs, 1.0) << "inflated far past the claimed size";
}

TEST(DataIdx, LabelOutOfRangeMessage) {
  TempDir dir;
  auto path = dir.write("train-labels-idx1-ubyte.gz", testing_data::gzip_stored(testing_data::idx_labels({1, 2, 3, 12})));
  auto r = read_idx_labels(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::data_loss);
  EXPECT_EQ(r.status().message(),
            path + ": label 12 at index 3 (byte offset 11 of the decompressed data) is out of range [0, 10)");
  auto plain = dir.write("plain-labels", testing_data::idx_labels({1, 2, 3, 12}));
  EXPECT_EQ(read_idx_labels(plain).status().message(),
            plain + ": label 12 at index 3 (byte offset 11) is out of range [0, 10)");
  // A smaller class count is honoured.
  auto five = dir.write("five", testing_data::idx_labels({0, 4, 5}));
  expect_error(read_idx_labels(five, 5), StatusCode::data_loss, {five, "label 5 at index 2", "[0, 5)"});
  EXPECT_TRUE(read_idx_labels(five, 6).is_ok());
}

TEST(DataIdx, EmptyFile) {
  TempDir dir;
  auto path = dir.write("empty", {});
  expect_error(read_idx_images(path), StatusCode::data_loss, {path, "file is empty", "16-byte"});
  expect_error(read_idx_labels(path), StatusCode::data_loss, {path, "file is empty", "8-byte"});
}

TEST(DataIdx, MissingFileAndDirectory) {
  TempDir dir;
  auto missing = dir.file("nope-idx3-ubyte");
  expect_error(read_idx_images(missing), StatusCode::not_found, {missing, "no such file"});
  // The wrong kind of file is a data error (exit code 3), not an OS failure (io_error, 1).
  expect_error(read_idx_images(dir.path()), StatusCode::data_loss, {dir.path(), "is a directory"});
  // A device never ends; it must be refused rather than read forever.
  expect_error(read_idx_images("/dev/zero"), StatusCode::data_loss, {"/dev/zero", "not a regular file"});
}

TEST(DataIdx, RandomCorruptionsGiveStatusNeverCrash) {
  // A small fuzz pass (run it under ASan+UBSan too): byte flips, truncations and
  // extensions of valid plain and gzip files. Each read must return ok with consistent
  // sizes, or data_loss; never crash, hang or throw.
  TempDir dir;
  Bytes images = testing_data::idx_images(3, 5, 5, testing_data::pattern_pixels(75));
  Bytes labels = testing_data::idx_labels({1, 2, 3});
  const Bytes seeds[4] = {images, testing_data::gzip_stored(images), labels,
                          testing_data::gzip_stored(labels)};
  std::mt19937_64 rng(2024);
  int failures = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int which = iter % 4;
    Bytes b = seeds[which];
    switch (rng() % 3) {
      case 0:  // flip 1-3 random bytes
        for (int k = 0, n = 1 + int(rng() % 3); k < n; ++k) b[rng() % b.size()] ^= uint8_t(1 + rng() % 255);
        break;
      case 1: b.resize(rng() % b.size()); break;  // truncate
      default: b.push_back(uint8_t(rng())); break;  // extend
    }
    auto path = dir.write("fuzz", b);
    Status st;
    if (which < 2) {
      auto r = read_idx_images(path);
      st = r.status();
      if (r.is_ok()) EXPECT_EQ(int64_t(r.value().pixels.size()), r.value().count * r.value().rows * r.value().cols);
    } else {
      auto r = read_idx_labels(path);
      st = r.status();
      if (r.is_ok()) for (uint8_t l : r.value()) EXPECT_LT(l, 10);
    }
    if (!st.is_ok()) {
      ++failures;
      EXPECT_EQ(st.code(), StatusCode::data_loss) << st.message();
      EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    }
  }
  EXPECT_GT(failures, 300) << failures;  // most mutations must be caught (every truncation/extension)
}

}  // namespace
}  // namespace mixprec
