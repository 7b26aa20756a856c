// dataset_test.cpp: MNIST-like directories (file discovery, count mismatch, variants),
// subsets, channel statistics, the synthetic generator, and Debian's Fashion-MNIST.
#include <gtest/gtest.h>

#include <cmath>
#include <sys/stat.h>

#include "data_test_util.h"
#include "mixprec/data/data.h"

namespace mixprec {
namespace {
using testing_data::Bytes;
using testing_data::TempDir;

void expect_message_has(const Status& s, StatusCode code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(int(s.code()), int(code)) << s.message();
  for (const auto& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "missing \"" << p << "\" in: " << s.message();
}

// n images of 2x2 whose pixels are all the sample's id; labels id % 10.
void write_mnist_dir(const TempDir& dir, const std::string& sub, const char* prefix, int n,
                     bool gz, int n_labels = -1) {
  Bytes pixels, labels;
  for (int i = 0; i < n; ++i) pixels.insert(pixels.end(), 4, uint8_t(i));
  for (int i = 0; i < (n_labels < 0 ? n : n_labels); ++i) labels.push_back(uint8_t(i % 10));
  Bytes img = testing_data::idx_images(uint32_t(n), 2, 2, pixels), lab = testing_data::idx_labels(labels);
  std::string sfx = gz ? ".gz" : "";
  dir.write(sub + "/" + prefix + "-images-idx3-ubyte" + sfx, gz ? testing_data::gzip_stored(img) : img);
  dir.write(sub + "/" + prefix + "-labels-idx1-ubyte" + sfx, gz ? testing_data::gzip_stored(lab) : lab);
}

TEST(DataDataset, LoadsGzipMnistDirectoryBothSplits) {
  TempDir dir;
  write_mnist_dir(dir, "mnist", "train", 12, true);
  write_mnist_dir(dir, "mnist", "t10k", 5, true);
  auto train = load_mnist_like(dir.file("mnist"), Split::train);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  const ImageDataset& ds = train.value();
  EXPECT_EQ(ds.count, 12);
  EXPECT_EQ(ds.channels, 1);
  EXPECT_EQ(ds.height, 2);
  EXPECT_EQ(ds.width, 2);
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_EQ(ds.image(11)[3], 11);
  EXPECT_EQ(ds.labels[11], 1);
  EXPECT_EQ(ds.name, "mnist");
  // No "fashion" in the path: the MNIST constants.
  EXPECT_DOUBLE_EQ(ds.mean[0], 0.1307);
  EXPECT_DOUBLE_EQ(ds.stddev[0], 0.3081);
  EXPECT_NE(ds.source.find("train-images-idx3-ubyte.gz"), std::string::npos) << ds.source;
  auto test = load_mnist_like(dir.file("mnist"), Split::test);
  ASSERT_TRUE(test.is_ok()) << test.status().message();
  EXPECT_EQ(test.value().count, 5);
}

TEST(DataDataset, VariantFromPathOrExplicit) {
  TempDir dir;
  write_mnist_dir(dir, "Fashion-MNIST", "train", 3, false);
  auto fashion = load_mnist_like(dir.file("Fashion-MNIST"), Split::train);
  ASSERT_TRUE(fashion.is_ok()) << fashion.status().message();
  EXPECT_EQ(fashion.value().name, "fashion-mnist");
  EXPECT_DOUBLE_EQ(fashion.value().mean[0], 0.2860);
  EXPECT_DOUBLE_EQ(fashion.value().stddev[0], 0.3530);
  auto forced = load_mnist_like(dir.file("Fashion-MNIST"), Split::train, MnistVariant::mnist);
  ASSERT_TRUE(forced.is_ok());
  EXPECT_DOUBLE_EQ(forced.value().mean[0], 0.1307);
}

TEST(DataDataset, PlainFilePreferredOverGzip) {
  TempDir dir;
  write_mnist_dir(dir, "d", "train", 3, true);
  write_mnist_dir(dir, "d", "train", 4, false);
  auto r = load_mnist_like(dir.file("d"), Split::train);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().count, 4);
}

TEST(DataDataset, CountMismatchNamesBothFiles) {
  TempDir dir;
  write_mnist_dir(dir, "d", "train", 3, false, /*n_labels=*/4);
  expect_message_has(load_mnist_like(dir.file("d"), Split::train).status(), StatusCode::data_loss,
                     {"train-images-idx3-ubyte", "image count 3", "label count 4", "train-labels-idx1-ubyte"});
}

TEST(DataDataset, MissingFilesAndDirectory) {
  TempDir dir;
  expect_message_has(load_mnist_like(dir.file("nowhere"), Split::train).status(), StatusCode::not_found,
                     {"nowhere", "no such directory"});
  write_mnist_dir(dir, "d", "train", 3, false);
  ::unlink(dir.file("d/train-labels-idx1-ubyte").c_str());
  expect_message_has(load_mnist_like(dir.file("d"), Split::train).status(), StatusCode::not_found,
                     {dir.file("d"), "train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"});
  expect_message_has(load_mnist_like(dir.file("d"), Split::test).status(), StatusCode::not_found,
                     {"t10k-images-idx3-ubyte"});
}

TEST(DataDataset, CorruptFileInDirectoryPropagates) {
  TempDir dir;
  write_mnist_dir(dir, "d", "train", 3, false);
  dir.write("d/train-labels-idx1-ubyte", testing_data::idx_labels({1, 2, 11}));
  expect_message_has(load_mnist_like(dir.file("d"), Split::train).status(), StatusCode::data_loss,
                     {"train-labels-idx1-ubyte", "label 11 at index 2 (byte offset 10)"});
}

TEST(DataDataset, SubsetTakesThePrefixAndClamps) {
  ImageDataset ds;
  ds.count = 4;
  ds.channels = 1;
  ds.height = ds.width = 1;
  ds.images = {10, 20, 30, 40};
  ds.labels = {1, 2, 3, 4};
  ds.num_classes = 10;
  ds.mean = {0.5};
  ds.stddev = {0.25};
  ImageDataset two = ds.subset(2);
  EXPECT_EQ(two.count, 2);
  EXPECT_EQ(two.images, (Bytes{10, 20}));
  EXPECT_EQ(two.labels, (Bytes{1, 2}));
  EXPECT_DOUBLE_EQ(two.stddev[0], 0.25);
  EXPECT_TRUE(two.validate().is_ok());
  EXPECT_EQ(ds.subset(100).count, 4);
  EXPECT_EQ(ds.subset(-1).count, 0);
  EXPECT_TRUE(ds.subset(0).validate().is_ok());
}

TEST(DataDataset, ValidateCatchesInconsistency) {
  ImageDataset ds = make_synthetic(3, 1, 2, 2, 2, 1);
  ds.labels[1] = 2;
  expect_message_has(ds.validate(), StatusCode::invalid_argument, {"label 2 at index 1", "[0, 2)"});
  ds = make_synthetic(3, 1, 2, 2, 2, 1);
  ds.images.pop_back();
  expect_message_has(ds.validate(), StatusCode::invalid_argument, {"images has 11 bytes", "expected 12"});
  ds = make_synthetic(3, 1, 2, 2, 2, 1);
  ds.stddev[0] = 0;
  expect_message_has(ds.validate(), StatusCode::invalid_argument, {"std > 0"});
}

TEST(DataDataset, ChannelStatsMatchHandValues) {
  ImageDataset ds;
  ds.count = 2;
  ds.channels = 2;
  ds.height = 1;
  ds.width = 2;
  // channel 0 sees {0, 255, 0, 255}: mean 0.5, std 0.5. channel 1 sees {51, 51, 51, 51}:
  // mean 0.2, std 0.
  ds.images = {0, 255, 51, 51, 0, 255, 51, 51};
  ds.labels = {0, 0};
  ds.num_classes = 1;
  std::vector<double> mean, stddev;
  compute_channel_stats(ds, mean, stddev);
  ASSERT_EQ(mean.size(), 2u);
  EXPECT_NEAR(mean[0], 0.5, 1e-15);
  EXPECT_NEAR(stddev[0], 0.5, 1e-15);
  EXPECT_NEAR(mean[1], 0.2, 1e-15);
  EXPECT_NEAR(stddev[1], 0.0, 1e-7);  // sqrt of a ~1e-17 cancellation residue at most
}

TEST(DataDataset, SyntheticIsDeterministicAndWellFormed) {
  ImageDataset a = make_synthetic(200, 3, 8, 8, 5, 42);
  ImageDataset b = make_synthetic(200, 3, 8, 8, 5, 42);
  ImageDataset c = make_synthetic(200, 3, 8, 8, 5, 43);
  EXPECT_TRUE(a.validate().is_ok()) << a.validate().message();
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, c.images);
  // Every class occurs (200 draws over 5 classes: missing one has probability ~1e-19).
  std::vector<int> per_class(5);
  for (uint8_t l : a.labels) ++per_class[l];
  for (int k = 0; k < 5; ++k) EXPECT_GT(per_class[size_t(k)], 0) << k;
  // mean/stddev are the data's own: recompute with a naive double loop per channel.
  for (int ch = 0; ch < 3; ++ch) {
    double s = 0, s2 = 0;
    int n = 0;
    for (int i = 0; i < 200; ++i)
      for (int j = 0; j < 64; ++j) {
        double x = a.image(i)[ch * 64 + j] / 255.0;
        s += x;
        s2 += x * x;
        ++n;
      }
    double m = s / n;
    EXPECT_NEAR(a.mean[size_t(ch)], m, 1e-12);
    EXPECT_NEAR(a.stddev[size_t(ch)], std::sqrt(s2 / n - m * m), 1e-9);
  }
}

TEST(DataDataset, SyntheticIsLearnableByNearestCentroid) {
  // Class centroids from the first half classify the second half: a learnable dataset
  // must do far better than chance (10%).
  ImageDataset ds = make_synthetic(1000, 1, 12, 12, 10, 7);
  const int64_t d = ds.sample_bytes();
  std::vector<double> centroid(size_t(10 * d), 0.0);
  std::vector<int> n(10, 0);
  for (int64_t i = 0; i < 500; ++i) {
    ++n[ds.labels[size_t(i)]];
    for (int64_t j = 0; j < d; ++j) centroid[size_t(ds.labels[size_t(i)] * d + j)] += ds.image(i)[j];
  }
  for (int k = 0; k < 10; ++k)
    for (int64_t j = 0; j < d; ++j) centroid[size_t(k * d + j)] /= std::max(n[size_t(k)], 1);
  int correct = 0;
  for (int64_t i = 500; i < 1000; ++i) {
    int best = -1;
    double best_dist = 1e300;
    for (int k = 0; k < 10; ++k) {
      double dist = 0;
      for (int64_t j = 0; j < d; ++j) {
        double diff = ds.image(i)[j] - centroid[size_t(k * d + j)];
        dist += diff * diff;
      }
      if (dist < best_dist) best_dist = dist, best = k;
    }
    correct += best == ds.labels[size_t(i)];
  }
  EXPECT_GT(correct, 450) << "accuracy " << correct / 500.0;
}

TEST(DataDataset, SyntheticRejectsBadArguments) {
  EXPECT_THROW(make_synthetic(10, 0, 8, 8, 10, 0), Error);
  EXPECT_THROW(make_synthetic(10, 1, 8, 8, 0, 0), Error);
  EXPECT_THROW(make_synthetic(int64_t(1) << 40, 1, 8, 8, 10, 0), Error);
}

constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

TEST(DataDataset, FashionMnistFromDebian) {
  struct stat st {};
  if (::stat(kFashionDir, &st) != 0) GTEST_SKIP() << kFashionDir << " missing (dataset-fashion-mnist)";
  auto train = load_mnist_like(kFashionDir, Split::train);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  auto test = load_mnist_like(kFashionDir, Split::test);
  ASSERT_TRUE(test.is_ok()) << test.status().message();
  EXPECT_EQ(train.value().count, 60000);
  EXPECT_EQ(test.value().count, 10000);
  EXPECT_EQ(train.value().height, 28);
  EXPECT_EQ(train.value().width, 28);
  EXPECT_EQ(train.value().name, "fashion-mnist");
  // Fashion-MNIST is balanced: 6000 train and 1000 test images per class (its paper).
  std::vector<int> tr(10), te(10);
  for (uint8_t l : train.value().labels) ++tr[l];
  for (uint8_t l : test.value().labels) ++te[l];
  for (int k = 0; k < 10; ++k) {
    EXPECT_EQ(tr[size_t(k)], 6000) << k;
    EXPECT_EQ(te[size_t(k)], 1000) << k;
  }
  // The published constants agree with the data itself (they are rounded to 4 digits).
  std::vector<double> mean, stddev;
  compute_channel_stats(train.value(), mean, stddev);
  EXPECT_NEAR(mean[0], 0.2860, 1e-4);
  EXPECT_NEAR(stddev[0], 0.3530, 1e-4);
}

}  // namespace
}  // namespace mixprec
