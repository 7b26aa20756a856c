// text_window_sampler_test.cpp: a language model's training windows drawn at seeded random
// offsets into a mapped text (text_window_start and the loader over ImageDataset::corpus).
// The draw is a pure function of (seed, epoch, position): the same arguments give the same
// start, every start lies in [begin, end - window] so no window reaches the test split, the
// draws reach both ends and cover every training byte over some epochs, are near uniform,
// and change with the seed, the epoch and the position. The loader's batches are the bytes
// at those starts; a resume at a batch index and a data-parallel shard see exactly the
// windows an uninterrupted single process sees; a file mapped for training is not resident.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string verse_text(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += char('a' + (i * 7 + i / 26) % 26);
  return text;
}

TEST(TextWindowSampler, APureFunctionInRangeThatReachesBothEnds) {
  const int64_t begin = 10, end = 20, window = 5;  // starts 10..15
  std::vector<int> hits(6, 0);
  const int draws = 60000;
  for (int p = 0; p < draws; ++p) {
    const int64_t s = text_window_start(7, 3, p, begin, end, window);
    ASSERT_GE(s, begin);
    ASSERT_LE(s, end - window);
    EXPECT_EQ(s, text_window_start(7, 3, p, begin, end, window));  // no hidden state
    ++hits[size_t(s - begin)];
  }
  // Near uniform: each of the 6 starts within 5% of 10000 (the binomial's sd is ~91).
  for (int h : hits) EXPECT_NEAR(h, draws / 6, draws / 6 / 20);
  // A window as long as the text has one start; a range not a power of two nor small.
  for (int p = 0; p < 100; ++p) EXPECT_EQ(text_window_start(1, 0, p, 5, 105, 100), 5);
  for (int p = 0; p < 1000; ++p) {
    const int64_t s = text_window_start(uint64_t(p) * 977, p, p, 0, (int64_t(1) << 40), 129);
    ASSERT_GE(s, 0);
    ASSERT_LE(s, (int64_t(1) << 40) - 129);
  }
}

TEST(TextWindowSampler, DiffersBySeedEpochAndPosition) {
  auto draws = [](uint64_t seed, int64_t epoch, int64_t first) {
    std::vector<int64_t> v;
    for (int64_t p = first; p < first + 64; ++p) v.push_back(text_window_start(seed, epoch, p, 0, 1 << 20, 129));
    return v;
  };
  const auto base = draws(0, 0, 0);
  EXPECT_EQ(base, draws(0, 0, 0));
  EXPECT_NE(base, draws(1, 0, 0));
  EXPECT_NE(base, draws(0, 1, 0));
  EXPECT_NE(base, draws(0, 0, 64));
  // (seed, epoch) pairs are not merely summed: (1, 0) and (0, 1) differ too.
  EXPECT_NE(draws(1, 0, 0), draws(0, 1, 0));
  // Not a constant stream: 64 draws from 2^20 starts are (almost surely) all distinct.
  EXPECT_EQ(std::set<int64_t>(base.begin(), base.end()).size(), base.size());
}

TEST(TextWindowSampler, TheLoaderDrawsTrainingWindowsFromTheTrainSplitAndCoversIt) {
  const std::string text = verse_text(1000);
  const std::string path = write_text("sampler_text.txt", text);
  auto train = load_text_windows(path, 9, Split::train);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  ASSERT_NE(train->corpus, nullptr);
  EXPECT_TRUE(train->images.empty());  // mapped, not copied
  EXPECT_EQ(train->count, (900 - 1) / 8);
  DataLoader loader(*train, {.batch_size = 16, .shuffle = true, .seed = 5, .prefetch = 0});
  std::vector<bool> covered(900, false);
  std::set<int64_t> starts_seen;
  for (int64_t e = 0; e < 100; ++e) {
    const auto starts = loader.epoch_order(e);
    ASSERT_EQ(int64_t(starts.size()), train->count);  // an epoch is as many windows as before
    for (int64_t s : starts) {
      ASSERT_GE(s, 0);
      ASSERT_LE(s + 9, 900) << "a training window reaches the test split";
      for (int64_t j = 0; j < 9; ++j) covered[size_t(s + j)] = true;
      starts_seen.insert(s);
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) EXPECT_TRUE(covered[i]) << "byte " << i << " never trained on";
  EXPECT_TRUE(starts_seen.count(0) && starts_seen.count(900 - 9));
  EXPECT_NE(loader.epoch_order(0), loader.epoch_order(1));

  // Batches hold the bytes at those starts: tokens the first 8, labels the next byte.
  loader.set_epoch(2);
  const auto starts = loader.epoch_order(2);
  int64_t row = 0;
  while (auto batch = loader.next()) {
    const int64_t B = batch->images.shape()[0];
    for (int64_t i = 0; i < B; ++i, ++row)
      for (int64_t t = 0; t < 8; ++t) {
        ASSERT_EQ(batch->images.at(i * 8 + t), double(uint8_t(text[size_t(starts[size_t(row)] + t)])));
        ASSERT_EQ(batch->labels.at(i * 8 + t), double(uint8_t(text[size_t(starts[size_t(row)] + t + 1)])));
      }
  }
  EXPECT_EQ(row, train->count);

  // The test split is the last tenth as fixed windows, whatever the loader's shuffle.
  auto test = load_text_windows(path, 9, Split::test);
  ASSERT_TRUE(test.is_ok());
  EXPECT_EQ(char(test->image(0)[0]), text[900]);
  DataLoader eval(*test, {.batch_size = 4, .shuffle = false, .prefetch = 0});
  EXPECT_EQ(eval.epoch_order(0), (std::vector<int64_t>{900, 908, 916, 924, 932, 940, 948, 956, 964, 972, 980, 988}));
}

std::vector<std::vector<double>> batches_from(DataLoader& loader, int64_t epoch, int64_t start) {
  EXPECT_TRUE(loader.begin_epoch(epoch, start).is_ok());
  std::vector<std::vector<double>> out;
  while (auto b = loader.next()) {
    std::vector<double> v;
    for (int64_t i = 0; i < b->images.numel(); ++i) v.push_back(b->images.at(i));
    out.push_back(v);
  }
  return out;
}

TEST(TextWindowSampler, AResumeAndTheBackgroundThreadAndShardsSeeTheSameWindows) {
  const std::string path = write_text("sampler_resume.txt", verse_text(5000));
  auto train = load_text_windows(path, 17, Split::train);
  ASSERT_TRUE(train.is_ok());
  auto data = std::make_shared<const ImageDataset>(*train);
  DataLoader sync(data, {.batch_size = 8, .seed = 11, .prefetch = 0});
  DataLoader ahead(data, {.batch_size = 8, .seed = 11, .prefetch = 3});
  const auto whole = batches_from(sync, 3, 0);
  ASSERT_EQ(int64_t(whole.size()), sync.num_batches());
  EXPECT_EQ(batches_from(ahead, 3, 0), whole);
  // Resumed at batch 7 of epoch 3 (a checkpoint's position): the rest of the same epoch.
  const auto resumed = batches_from(ahead, 3, 7);
  EXPECT_EQ(resumed, std::vector<std::vector<double>>(whole.begin() + 7, whole.end()));
  EXPECT_NE(batches_from(sync, 4, 0), whole);
  // Two data-parallel shards of 4: rows 0, 2, 4, 6 and 1, 3, 5, 7 of the one process's batches.
  DataLoader rank0(data, {.batch_size = 4, .seed = 11, .prefetch = 0, .shard_rank = 0, .shard_count = 2});
  DataLoader rank1(data, {.batch_size = 4, .seed = 11, .prefetch = 0, .shard_rank = 1, .shard_count = 2});
  const auto b0 = batches_from(rank0, 3, 0), b1 = batches_from(rank1, 3, 0);
  ASSERT_EQ(b0.size(), b1.size());
  const size_t row = 16;  // tokens per window
  for (size_t k = 0; k < b0.size() && k + 1 < whole.size(); ++k)
    for (size_t r = 0; r < 8; ++r) {
      const auto& mine = r % 2 == 0 ? b0[k] : b1[k];
      ASSERT_TRUE(std::equal(whole[k].begin() + std::ptrdiff_t(r * row), whole[k].begin() + std::ptrdiff_t((r + 1) * row),
                             mine.begin() + std::ptrdiff_t(r / 2 * row)))
          << "batch " << k << " row " << r;
    }
}

// A sparse file of 2 GiB (zeros, then a little text; twice the old cap of reading a text
// whole): mapped without reading it, and a few epochs' worth of batches leave the process's
// peak resident set far below the file (the pages each batch copies are released).
TEST(TextWindowSampler, AFileBiggerThanMemoryIsMappedNotRead) {
  const std::string path = ::testing::TempDir() + "sampler_sparse.txt";
  {
    std::ofstream(path, std::ios::binary) << "";
  }
  const int64_t size = int64_t(2) << 30;
  ASSERT_EQ(::truncate(path.c_str(), off_t(size)), 0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(size - 4096);
    f << verse_text(4096);
  }
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  auto train = load_text_windows(path, 129, Split::train);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  EXPECT_EQ(train->count, (size - int64_t(size * 0.1) - 1) / 128);
  auto test = load_text_windows(path, 129, Split::test);
  ASSERT_TRUE(test.is_ok());
  DataLoader loader(*train, {.batch_size = 64, .seed = 1, .prefetch = 1});
  loader.set_epoch(0);
  for (int b = 0; b < 500; ++b) ASSERT_TRUE(loader.next().has_value());  // 32k windows across 2 GiB
  DataLoader eval(test->subset(4096), {.batch_size = 64, .shuffle = false, .prefetch = 0});
  while (eval.next()) {
  }
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  // ru_maxrss is in KiB. Without releasing the pages 32k windows would keep ~128-256 MiB of
  // the map resident; reading the file would take 2 GiB. A batch is 64 windows of 8 KiB at most.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024);
  ::unlink(path.c_str());
}

TEST(TextWindowSampler, EmptyShortAndDirectoryInputsKeepTheirErrors) {
  const std::string empty = write_text("sampler_empty.txt", "");
  auto e = load_text_windows(empty, 9, Split::train);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("holds 0 bytes (0 in the file"), std::string::npos) << e.status().message();
  auto d = load_text_windows(::testing::TempDir(), 9, Split::train);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::data_loss);
  EXPECT_NE(d.status().message().find("directory"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace mixprec
