// data_loader_test.cpp: the DataLoader's order, coverage, batch counts, normalisation
// values (against numbers computed by hand from the published constants), resume, the
// prefetch thread's shutdown, and its memory accounting.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

// count 1-channel 2x2 images whose 4 pixels all hold the sample id (< 256), label id % 10.
// normalize=false turns pixel p into p/255, so round(x * 255) recovers the id.
ImageDataset id_dataset(int64_t count) {
  ImageDataset ds;
  ds.count = count;
  ds.channels = 1;
  ds.height = ds.width = 2;
  ds.num_classes = 10;
  ds.name = "ids";
  for (int64_t i = 0; i < count; ++i) {
    ds.images.insert(ds.images.end(), 4, uint8_t(i));
    ds.labels.push_back(uint8_t(i % 10));
  }
  return ds;
}

DataLoaderOptions raw_options(int64_t batch_size, bool shuffle, uint64_t seed = 0, int prefetch = 2) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.seed = seed;
  o.prefetch = prefetch;
  o.normalize = false;
  return o;
}

// The sample ids of one batch, decoded from its pixels; checks the batch's internal
// consistency (all 4 pixels equal, label == id % 10) on the way.
std::vector<int64_t> batch_ids(const Batch& b) {
  std::vector<int64_t> ids;
  const int64_t B = b.images.size(0);
  const float* x = b.images.data_ptr<float>();
  const int64_t* y = b.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < B; ++i) {
    int64_t id = std::lround(x[i * 4] * 255.0f);
    for (int j = 1; j < 4; ++j) EXPECT_EQ(x[i * 4 + j], x[i * 4]) << "sample " << i;
    EXPECT_EQ(y[i], id % 10) << "label of sample " << id;
    ids.push_back(id);
  }
  return ids;
}

// Every id of one epoch, in the order the loader produced them.
std::vector<int64_t> epoch_ids(DataLoader& loader, int64_t epoch, int64_t* batches = nullptr) {
  loader.set_epoch(epoch);
  std::vector<int64_t> ids;
  int64_t n = 0;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->index, n);
    EXPECT_EQ(b->epoch, epoch);
    auto part = batch_ids(*b);
    ids.insert(ids.end(), part.begin(), part.end());
    ++n;
  }
  if (batches) *batches = n;
  return ids;
}

TEST(DataShuffle, OrderIsAPermutationAndDependsOnSeedAndEpoch) {
  auto a = shuffled_order(1000, 42, 0);
  std::set<int64_t> uniq(a.begin(), a.end());
  EXPECT_EQ(uniq.size(), 1000u);
  EXPECT_EQ(*uniq.begin(), 0);
  EXPECT_EQ(*uniq.rbegin(), 999);
  EXPECT_EQ(a, shuffled_order(1000, 42, 0));
  EXPECT_NE(a, shuffled_order(1000, 42, 1));
  EXPECT_NE(a, shuffled_order(1000, 43, 0));
  // Not seed + epoch: (1, 0) and (0, 1) are different streams.
  EXPECT_NE(shuffled_order(1000, 1, 0), shuffled_order(1000, 0, 1));
  // A shuffle that moves almost nothing would be a bug: expect ~1 fixed point on average.
  int fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += a[size_t(i)] == i;
  EXPECT_LT(fixed, 10);
  EXPECT_TRUE(shuffled_order(0, 1, 1).empty());
  EXPECT_EQ(shuffled_order(1, 1, 1), std::vector<int64_t>{0});
}

TEST(DataShuffle, FirstPositionIsRoughlyUniform) {
  // Over 2000 epochs of a 4-element shuffle each element leads ~500 times; a biased draw
  // (e.g. rng() % (i + 1) with a broken range) shows up as a lopsided count.
  std::vector<int> first(4);
  for (int e = 0; e < 2000; ++e) ++first[size_t(shuffled_order(4, 9, e)[0])];
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(first[size_t(k)], 500, 90) << k;  // ~4.5 sigma
}

TEST(DataLoader, BatchShapesDtypesAndLabels) {
  DataLoader loader(id_dataset(10), raw_options(4, false));
  EXPECT_EQ(loader.num_batches(), 3);
  EXPECT_EQ(loader.num_samples(), 10);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->images.shape(), (Shape{4, 1, 2, 2}));
  EXPECT_EQ(b->images.dtype(), DType::f32);
  EXPECT_TRUE(b->images.is_contiguous());
  EXPECT_EQ(b->labels.shape(), (Shape{4}));
  EXPECT_EQ(b->labels.dtype(), DType::i64);
  EXPECT_EQ(batch_ids(*b), (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_TRUE(loader.next().has_value());
  auto last = loader.next();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->images.shape(), (Shape{2, 1, 2, 2}));  // the partial batch
  EXPECT_EQ(batch_ids(*last), (std::vector<int64_t>{8, 9}));
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_FALSE(loader.next().has_value());  // stays exhausted until the next epoch
}

TEST(DataLoader, EverySampleOnceAndOrderMatchesEpochOrder) {
  DataLoader loader(id_dataset(103), raw_options(10, true, 5));
  for (int64_t epoch : {0, 1, 7}) {
    int64_t batches = 0;
    auto ids = epoch_ids(loader, epoch, &batches);
    EXPECT_EQ(batches, 11);
    EXPECT_EQ(ids, loader.epoch_order(epoch));
    std::set<int64_t> uniq(ids.begin(), ids.end());
    EXPECT_EQ(uniq.size(), 103u) << "epoch " << epoch;
  }
}

TEST(DataLoader, SameSeedSameOrderDifferentEpochDifferentOrder) {
  DataLoader a(id_dataset(64), raw_options(8, true, 123));
  DataLoader b(id_dataset(64), raw_options(8, true, 123, /*prefetch=*/0));
  DataLoader c(id_dataset(64), raw_options(8, true, 124));
  auto a0 = epoch_ids(a, 0);
  manual_seed(999);  // the global RNG must not influence the loader's order
  EXPECT_EQ(a0, epoch_ids(b, 0));
  EXPECT_NE(a0, epoch_ids(a, 1));
  EXPECT_NE(a0, epoch_ids(c, 0));
  EXPECT_EQ(a0, epoch_ids(a, 0));  // epoch 0 again, after epoch 1
  EXPECT_EQ(a0, shuffled_order(64, 123, 0));
}

TEST(DataLoader, DropLastCounts) {
  DataLoaderOptions o = raw_options(10, true, 1);
  o.drop_last = true;
  DataLoader loader(id_dataset(103), o);
  EXPECT_EQ(loader.num_batches(), 10);
  EXPECT_EQ(loader.num_samples(), 100);
  int64_t batches = 0;
  auto ids = epoch_ids(loader, 0, &batches);
  EXPECT_EQ(batches, 10);
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 100u);
  auto order = loader.epoch_order(0);
  EXPECT_EQ(ids, std::vector<int64_t>(order.begin(), order.begin() + 100));

  DataLoaderOptions exact = o;  // 100 / 10: nothing to drop
  DataLoader even(id_dataset(100), exact);
  EXPECT_EQ(even.num_batches(), 10);
  DataLoader tiny(id_dataset(7), o);  // fewer samples than one batch
  EXPECT_EQ(tiny.num_batches(), 0);
  EXPECT_FALSE(tiny.next().has_value());
  o.drop_last = false;
  DataLoader keep(id_dataset(7), o);
  EXPECT_EQ(keep.num_batches(), 1);
}

TEST(DataLoader, NormalisationMatchesHandComputedValues) {
  // Fashion-MNIST constants: x = (p / 255 - 0.2860) / 0.3530, values computed by hand.
  ImageDataset ds = id_dataset(1);
  ds.images = {0, 1, 128, 255};
  ds.mean = {0.2860};
  ds.stddev = {0.3530};
  DataLoaderOptions o;
  o.batch_size = 1;
  DataLoader loader(ds, o);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  const float* x = b->images.data_ptr<float>();
  // 1e-6 relative: one f32 rounding of a value computed in double (2^-24 ~ 6e-8).
  EXPECT_NEAR(x[0], -0.8101983002832861, 1e-6);
  EXPECT_NEAR(x[1], -0.7990890407154363, 1e-6);
  EXPECT_NEAR(x[2], 0.6117869244014887, 1e-6);
  EXPECT_NEAR(x[3], 2.0226628895184136, 1e-6);
}

TEST(DataLoader, CifarPerChannelNormalisation) {
  ImageDataset ds;
  ds.count = 1;
  ds.channels = 3;
  ds.height = 1;
  ds.width = 3;
  ds.images = {0, 255, 100, 0, 255, 100, 0, 255, 100};  // each channel: 0, 255, 100
  ds.labels = {4};
  ds.num_classes = 10;
  ds.mean = {0.4914, 0.4822, 0.4465};
  ds.stddev = {0.2470, 0.2435, 0.2616};
  DataLoaderOptions o;
  o.batch_size = 1;
  DataLoader loader(ds, o);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->images.shape(), (Shape{1, 3, 1, 3}));
  const double expected[9] = {-1.9894736842105263, 2.0591093117408903, -0.4017940779550687,
                              -1.980287474332649,  2.126488706365503,  -0.36978701131376585,
                              -1.7068042813455657, 2.1158256880733943, -0.20773370510283629};
  const float* x = b->images.data_ptr<float>();
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(x[i], expected[i], 1e-6) << i;  // one f32 rounding
  EXPECT_EQ(b->labels.data_ptr<int64_t>()[0], 4);
}

TEST(DataLoader, ResumeMidEpochGivesTheRemainingBatches) {
  DataLoader loader(id_dataset(50), raw_options(8, true, 77));
  auto full = loader.epoch_order(3);
  ASSERT_TRUE(loader.begin_epoch(3, 4).is_ok());
  EXPECT_EQ(loader.position(), 4);
  std::vector<int64_t> ids;
  int64_t expect_index = 4;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->index, expect_index++);
    auto part = batch_ids(*b);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  EXPECT_EQ(expect_index, 7);  // ceil(50 / 8) = 7 batches
  EXPECT_EQ(loader.position(), 7);
  EXPECT_EQ(ids, std::vector<int64_t>(full.begin() + 32, full.end()));
  ASSERT_TRUE(loader.begin_epoch(3, 7).is_ok());  // an empty remainder is allowed
  EXPECT_FALSE(loader.next().has_value());
}

TEST(DataLoader, BeginEpochRejectsBadArguments) {
  DataLoader loader(id_dataset(10), raw_options(4, true));
  Status s = loader.begin_epoch(0, 4);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("start_batch 4: expected 0..3"), std::string::npos) << s.message();
  EXPECT_EQ(loader.begin_epoch(-1, 0).code(), StatusCode::invalid_argument);
  EXPECT_EQ(loader.begin_epoch(0, -1).code(), StatusCode::invalid_argument);
  EXPECT_THROW(loader.set_epoch(-2), Error);
}

TEST(DataLoader, ConstructorRejectsBadOptions) {
  EXPECT_THROW(DataLoader(id_dataset(4), raw_options(0, true)), Error);
  EXPECT_THROW(DataLoader(id_dataset(4), raw_options(2, true, 0, -1)), Error);
  DataLoaderOptions norm;  // normalize=true needs mean/stddev, which id_dataset lacks
  EXPECT_THROW(DataLoader(id_dataset(4), norm), Error);
  ImageDataset broken = id_dataset(4);
  broken.labels.pop_back();
  EXPECT_THROW(DataLoader(broken, raw_options(2, true)), Error);
  EXPECT_THROW(DataLoader(std::shared_ptr<const ImageDataset>(), raw_options(2, true)), Error);
}

TEST(DataLoader, BatchesAreChargedToDataMemory) {
  const int64_t before = current_bytes(MemoryCategory::data);
  DataLoader loader(make_synthetic(64, 3, 16, 16, 10, 1), DataLoaderOptions{.batch_size = 32});
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  // The batch in hand alone: 32*3*16*16 floats + 32 labels.
  const int64_t batch_bytes = 32 * 3 * 16 * 16 * 4 + 32 * 8;
  EXPECT_GE(current_bytes(MemoryCategory::data) - before, batch_bytes);
  // The prefetched batches are data too, never activations: at most prefetch (2) more.
  EXPECT_LE(current_bytes(MemoryCategory::data) - before, 3 * batch_bytes + 4096);
}

// Runs fn on another thread and fails (then aborts, since a hung thread cannot be joined)
// if it does not finish within `seconds`.
void expect_finishes(const char* what, double seconds, std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  std::thread([fn, done] { fn(); done->set_value(); }).detach();
  if (fut.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not finish within " << seconds << " s";
    std::fprintf(stderr, "%s hung; aborting\n", what);
    std::abort();
  }
}

TEST(DataLoader, DestructionMidEpochDoesNotHang) {
  auto ds = std::make_shared<const ImageDataset>(make_synthetic(4096, 1, 28, 28, 10, 3));
  expect_finishes("destroy with a full prefetch queue", 10, [ds] {
    DataLoader loader(ds, DataLoaderOptions{.batch_size = 16, .prefetch = 2});
    loader.set_epoch(0);
    auto b = loader.next();
    EXPECT_TRUE(b.has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the queue fill
  });
  expect_finishes("destroy right after begin_epoch", 10, [ds] {
    DataLoader loader(ds, DataLoaderOptions{.batch_size = 16, .prefetch = 4});
    EXPECT_TRUE(loader.begin_epoch(2, 5).is_ok());
  });
  expect_finishes("restart epochs repeatedly", 10, [ds] {
    DataLoader loader(ds, DataLoaderOptions{.batch_size = 64, .prefetch = 1});
    for (int e = 0; e < 20; ++e) {
      loader.set_epoch(e);
      auto b = loader.next();
      EXPECT_TRUE(b.has_value());
      EXPECT_EQ(b->epoch, e);
    }
  });
  expect_finishes("destroy never started", 10, [ds] { DataLoader loader(ds); });
}

TEST(DataLoader, PrefetchAndSynchronousPathsAgreeBitForBit) {
  auto ds = std::make_shared<const ImageDataset>(make_synthetic(100, 3, 4, 4, 10, 5));
  DataLoaderOptions o{.batch_size = 16, .shuffle = true, .seed = 8};
  DataLoaderOptions sync = o;
  sync.prefetch = 0;
  DataLoader a(ds, o), b(ds, sync);
  a.set_epoch(4);
  b.set_epoch(4);
  int n = 0;
  while (auto x = a.next()) {
    auto y = b.next();
    ASSERT_TRUE(y.has_value());
    EXPECT_EQ(x->images.to_vector(), y->images.to_vector()) << "batch " << n;
    EXPECT_EQ(x->labels.to_vector_f64(), y->labels.to_vector_f64()) << "batch " << n;
    ++n;
  }
  EXPECT_FALSE(b.next().has_value());
  EXPECT_EQ(n, 7);
}

// Data-parallel shards (DataLoaderOptions::shard_rank/shard_count): global batch k of N
// shards of batch b is, as a set, batch k of one loader of batch N x b, for every rank count
// and dataset size, including the final partial batch (split when each shard gets a sample
// of it, dropped otherwise); every shard has the same number of batches.
TEST(DataLoader, ShardsTogetherServeTheOneProcessBatches) {
  for (int64_t count : {200, 203, 193, 190}) {
    for (int shards : {2, 3, 4}) {
      const int64_t b = 16, global = b * shards;
      DataLoader whole(id_dataset(count), raw_options(global, /*shuffle=*/true, 7));
      std::vector<std::unique_ptr<DataLoader>> parts;
      for (int r = 0; r < shards; ++r) {
        DataLoaderOptions o = raw_options(b, true, 7);
        o.shard_rank = r;
        o.shard_count = shards;
        parts.push_back(std::make_unique<DataLoader>(id_dataset(count), o));
      }
      const int64_t tail = count % global;
      const int64_t expected_batches = count / global + (tail >= shards ? 1 : 0);
      for (auto& p : parts) EXPECT_EQ(p->num_batches(), expected_batches) << count << " samples, " << shards;
      for (int64_t epoch : {0, 3}) {
        whole.set_epoch(epoch);
        for (auto& p : parts) p->set_epoch(epoch);
        for (int64_t k = 0; k < expected_batches; ++k) {
          std::vector<int64_t> one = batch_ids(*whole.next()), many;
          for (auto& p : parts) {
            auto part = batch_ids(*p->next());
            EXPECT_FALSE(part.empty());
            many.insert(many.end(), part.begin(), part.end());
          }
          std::sort(one.begin(), one.end());
          std::sort(many.begin(), many.end());
          EXPECT_EQ(one, many) << "global batch " << k << " of " << count << " samples over " << shards << " shards";
        }
        for (auto& p : parts) EXPECT_FALSE(p->next().has_value());
      }
    }
  }
}

TEST(DataLoader, ShardOptionsAreChecked) {
  DataLoaderOptions o = raw_options(4, false);
  o.shard_count = 2;
  o.shard_rank = 2;
  EXPECT_THROW(DataLoader(id_dataset(10), o), Error);
  o.shard_rank = -1;
  EXPECT_THROW(DataLoader(id_dataset(10), o), Error);
  o.shard_count = 0;
  o.shard_rank = 0;
  EXPECT_THROW(DataLoader(id_dataset(10), o), Error);
}

}  // namespace
}  // namespace mixprec
