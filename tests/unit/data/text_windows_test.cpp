// text_windows_test.cpp: a text file as a language model's data (load_text_windows and the
// loader's token batches): windows of L bytes overlapping by one, so every byte of a split
// but its first is a target exactly once; the last 10% is the test split; tokens are a
// window's first L-1 bytes and labels the next byte at each position; a too-short text, a
// missing file and a FIFO are errors naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TextWindows, EveryByteOfASplitIsATargetOnceAndTheLastTenthIsTheTestSplit) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + (i * 7) % 26);
  const std::string path = write_text("text_windows.txt", text);
  auto train = load_text_windows(path, 9, Split::train);
  auto test = load_text_windows(path, 9, Split::test);
  ASSERT_TRUE(train.is_ok()) << train.status().message();
  ASSERT_TRUE(test.is_ok()) << test.status().message();
  EXPECT_TRUE(train->text);
  EXPECT_EQ(train->width, 9);
  EXPECT_EQ(train->count, (900 - 1) / 8);  // bytes 0..899, windows step 8
  EXPECT_EQ(test->count, (100 - 1) / 8);   // bytes 900..999
  ASSERT_TRUE(train->validate().is_ok());
  // Window i holds bytes [8i, 8i + 9): the targets (bytes 1..8 of each) cover 1..8*count once.
  std::map<int64_t, int> targets;
  for (int64_t i = 0; i < train->count; ++i)
    for (int64_t j = 0; j < 9; ++j) {
      EXPECT_EQ(char(train->image(i)[j]), text[size_t(8 * i + j)]);
      if (j > 0) ++targets[8 * i + j];
    }
  EXPECT_EQ(int64_t(targets.size()), 8 * train->count);
  for (const auto& [pos, n] : targets) EXPECT_EQ(n, 1) << pos;
  EXPECT_EQ(char(test->image(0)[0]), text[900]);

  DataLoader loader(*train, {.batch_size = 4, .shuffle = false, .prefetch = 0});
  loader.set_epoch(0);
  auto batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->images.shape(), (Shape{4, 8}));
  ASSERT_EQ(batch->labels.shape(), (Shape{4, 8}));
  EXPECT_EQ(batch->images.dtype(), DType::i64);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t t = 0; t < 8; ++t) {
      EXPECT_EQ(batch->images.at(i * 8 + t), double(uint8_t(text[size_t(8 * i + t)])));
      EXPECT_EQ(batch->labels.at(i * 8 + t), double(uint8_t(text[size_t(8 * i + t + 1)])));
    }
}

TEST(TextWindows, ShortMissingAndNonRegularFilesAreErrorsNamingThem) {
  const std::string short_path = write_text("text_short.txt", "In the beginning");
  auto s = load_text_windows(short_path, 129, Split::test);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find(short_path), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("fewer than one window of 129 bytes"), std::string::npos);
  auto missing = load_text_windows(::testing::TempDir() + "no_such_text.txt", 9, Split::train);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  const std::string fifo = ::testing::TempDir() + "text_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = load_text_windows(fifo, 9, Split::train);  // refused at once, never waits for a writer
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("FIFO"), std::string::npos) << f.status().message();
  ::unlink(fifo.c_str());
  EXPECT_FALSE(load_text_windows(short_path, 1, Split::train).is_ok());  // window < 2
}

}  // namespace
}  // namespace mixprec
