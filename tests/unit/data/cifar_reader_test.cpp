// cifar_reader_test.cpp: CIFAR-10 binary batches written record by record here: layout
// (label byte, then R, G, B planes), record-size and label errors, and directory loading.
#include <gtest/gtest.h>

#include "data_test_util.h"
#include "mixprec/data/data.h"

namespace mixprec {
namespace {
using testing_data::Bytes;
using testing_data::TempDir;

constexpr size_t kPixels = 3 * 32 * 32, kRecord = 1 + kPixels;

// Record r: label labels[r]; pixel k = (r * 31 + k) % 256 so every record differs.
Bytes cifar_records(const Bytes& labels, int first_id = 0) {
  Bytes b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.push_back(labels[r]);
    for (size_t k = 0; k < kPixels; ++k) b.push_back(uint8_t(((first_id + r) * 31 + k) % 256));
  }
  return b;
}

void expect_message_has(const Status& s, StatusCode code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(int(s.code()), int(code)) << s.message();
  for (const auto& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "missing \"" << p << "\" in: " << s.message();
}

TEST(DataCifar, BatchRoundTripKeepsChwLayout) {
  TempDir dir;
  auto path = dir.write("test_batch.bin", cifar_records({3, 0, 9}));
  auto r = read_cifar10_batch(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const ImageDataset& ds = r.value();
  EXPECT_EQ(ds.count, 3);
  EXPECT_EQ(ds.channels, 3);
  EXPECT_EQ(ds.height, 32);
  EXPECT_EQ(ds.width, 32);
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_EQ(ds.labels, (Bytes{3, 0, 9}));
  // Record 2, green plane (c=1), row 5, column 7: byte 1024 + 5*32 + 7 of its pixels.
  size_t k = 1024 + 5 * 32 + 7;
  EXPECT_EQ(ds.image(2)[k], uint8_t((2 * 31 + k) % 256));
  EXPECT_EQ(ds.image(0)[0], 0);
  EXPECT_EQ(ds.image(1)[kPixels - 1], uint8_t((31 + kPixels - 1) % 256));
  ASSERT_EQ(ds.mean.size(), 3u);
  EXPECT_DOUBLE_EQ(ds.mean[2], 0.4465);
  EXPECT_DOUBLE_EQ(ds.stddev[0], 0.2470);
  EXPECT_TRUE(ds.validate().is_ok());
}

TEST(DataCifar, GzipBatchIsDetectedByMagic) {
  TempDir dir;
  auto path = dir.write("test_batch.bin", testing_data::gzip_stored(cifar_records({1, 2})));
  auto r = read_cifar10_batch(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().count, 2);
  EXPECT_EQ(r.value().image(1)[100], uint8_t((31 + 100) % 256));
}

TEST(DataCifar, RecordSizeError) {
  TempDir dir;
  Bytes b = cifar_records({1, 2});
  b.resize(b.size() + 5, 0);  // 2 * 3073 + 5 = 6151 bytes
  auto path = dir.write("data_batch_1.bin", b);
  expect_message_has(read_cifar10_batch(path).status(), StatusCode::data_loss,
                     {path, "size 6151 bytes", "not a multiple of the CIFAR-10 record size 3073",
                      "2 whole records and 5 bytes left over"});
}

TEST(DataCifar, LabelOutOfRange) {
  TempDir dir;
  auto path = dir.write("data_batch_1.bin", cifar_records({1, 10, 2}));
  expect_message_has(read_cifar10_batch(path).status(), StatusCode::data_loss,
                     {path, "label 10 in record 1 (byte offset 3073) is out of range [0, 10)"});
}

TEST(DataCifar, EmptyAndMissingFiles) {
  TempDir dir;
  auto empty = dir.write("empty.bin", {});
  expect_message_has(read_cifar10_batch(empty).status(), StatusCode::data_loss, {empty, "file is empty", "3073"});
  expect_message_has(read_cifar10_batch(dir.file("nope.bin")).status(), StatusCode::not_found, {"nope.bin"});
}

TEST(DataCifar, LoadTrainConcatenatesFiveBatchesInOrder) {
  TempDir dir;
  // data_batch_i holds i records with ids continuing across files: 1+2+3+4+5 = 15.
  int id = 0;
  Bytes all_labels;
  for (int i = 1; i <= 5; ++i) {
    Bytes labels;
    for (int r = 0; r < i; ++r) labels.push_back(uint8_t((id + r) % 10));
    dir.write("cifar-10-batches-bin/data_batch_" + std::to_string(i) + ".bin", cifar_records(labels, id));
    all_labels.insert(all_labels.end(), labels.begin(), labels.end());
    id += i;
  }
  dir.write("cifar-10-batches-bin/test_batch.bin", cifar_records({7}));
  // The parent of cifar-10-batches-bin/ is accepted.
  auto train = load_cifar10(dir.path(), Split::train);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  EXPECT_EQ(train.value().count, 15);
  EXPECT_EQ(train.value().labels, all_labels);
  for (int s = 0; s < 15; ++s) EXPECT_EQ(train.value().image(s)[10], uint8_t((s * 31 + 10) % 256)) << s;
  EXPECT_TRUE(train.value().validate().is_ok());
  auto test = load_cifar10(dir.path() + "/cifar-10-batches-bin", Split::test);
  ASSERT_TRUE(test.is_ok()) << test.status().message();
  EXPECT_EQ(test.value().count, 1);
  EXPECT_EQ(test.value().labels[0], 7);
}

TEST(DataCifar, LoadReportsTheMissingBatch) {
  TempDir dir;
  for (int i : {1, 2, 4, 5}) dir.write("data_batch_" + std::to_string(i) + ".bin", cifar_records({1}));
  expect_message_has(load_cifar10(dir.path(), Split::train).status(), StatusCode::not_found,
                     {dir.path(), "data_batch_3.bin"});
  expect_message_has(load_cifar10(dir.file("absent"), Split::test).status(), StatusCode::not_found,
                     {"absent", "no such directory"});
}

}  // namespace
}  // namespace mixprec
