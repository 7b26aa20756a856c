// image_folder_test.cpp: a folder of images as a dataset (load_image_folder): pixels exactly
// as written (PNGs written here with libpng's own writer), labels from the sorted subfolder
// names, colour decided by any colour image, a forced class list and channel count (how a
// test folder follows the train folder), files that are not images ignored; split_off holds
// out a fixed, disjoint share that together with the rest is the whole dataset.
#include <gtest/gtest.h>
#include <png.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

void write_png(const std::string& path, int w, int h, bool colour, const std::vector<uint8_t>& pixels) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = uint32_t(w);
  image.height = uint32_t(h);
  image.format = colour ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  ASSERT_TRUE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr)) << path;
}

std::string make_dir(const std::string& path) {
  ::mkdir(path.c_str(), 0755);
  return path;
}

// root/<class>/img<i>.png: 3x2 gray images whose pixels encode (class, i).
std::string gray_folder(const std::string& name, const std::vector<std::string>& classes, int per_class) {
  const std::string root = make_dir(::testing::TempDir() + name);
  for (size_t c = 0; c < classes.size(); ++c) {
    const std::string dir = make_dir(root + "/" + classes[c]);
    for (int i = 0; i < per_class; ++i) {
      std::vector<uint8_t> px(6);
      for (int p = 0; p < 6; ++p) px[size_t(p)] = uint8_t(100 * c + 10 * i + p);
      write_png(dir + "/img" + std::to_string(i) + ".png", 3, 2, false, px);
    }
  }
  return root;
}

TEST(ImageFolder, PixelsAndLabelsAreTheFilesInSortedOrder) {
  // Created out of order: the labels follow the sorted names, not readdir's order.
  const std::string root = gray_folder("folder_sorted", {"zebra", "apple"}, 2);
  std::ofstream(root + "/apple/notes.txt") << "not an image";
  auto d = load_image_folder(root);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->class_names, (std::vector<std::string>{"apple", "zebra"}));
  EXPECT_EQ(d->count, 4);
  EXPECT_EQ(d->channels, 1);
  EXPECT_EQ(d->height, 2);
  EXPECT_EQ(d->width, 3);
  EXPECT_EQ(d->num_classes, 2);
  EXPECT_EQ(d->labels, (std::vector<uint8_t>{0, 0, 1, 1}));
  // apple was written as class index 1 (100 + 10 i + p), zebra as 0.
  for (int s = 0; s < 4; ++s)
    for (int p = 0; p < 6; ++p) {
      const int written_class = s < 2 ? 1 : 0, i = s % 2;
      EXPECT_EQ(int(d->image(s)[p]), 100 * written_class + 10 * i + p) << "sample " << s << " pixel " << p;
    }
  EXPECT_NE(d->source.find("1 other files ignored"), std::string::npos) << d->source;
  ASSERT_EQ(d->mean.size(), 1u);
  ASSERT_EQ(d->stddev.size(), 1u);
}

TEST(ImageFolder, AnyColourImageMakesThreeChannelsAndGrayIsCopied) {
  const std::string root = gray_folder("folder_colour", {"a", "b"}, 1);
  write_png(root + "/b/rgb.png", 3, 2, true, std::vector<uint8_t>(18, 7));
  auto d = load_image_folder(root);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->channels, 3);
  // The gray image of class a (pixels 0..5) appears in each of the three planes.
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 6; ++p) EXPECT_EQ(int(d->image(0)[c * 6 + p]), p);
}

TEST(ImageFolder, AGivenClassListAndChannelCountAreFollowed) {
  const std::string root = gray_folder("folder_given", {"b"}, 1);
  auto d = load_image_folder(root, {"a", "b", "c"}, 3);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->num_classes, 3);
  EXPECT_EQ(d->labels, (std::vector<uint8_t>{1}));
  EXPECT_EQ(d->channels, 3);
  auto unknown = load_image_folder(root, {"x", "y"});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("class 'b' is not one of the training classes (x, y)"), std::string::npos)
      << unknown.status().message();
}

TEST(ImageFolder, BadFoldersAreErrorsNamingThePlace) {
  const std::string root = gray_folder("folder_bad", {"a"}, 1);
  write_png(root + "/a/wide.png", 4, 2, false, std::vector<uint8_t>(8, 1));
  auto sizes = load_image_folder(root);
  ASSERT_FALSE(sizes.is_ok());
  EXPECT_EQ(sizes.status().code(), StatusCode::data_loss);
  EXPECT_NE(sizes.status().message().find("wide.png is 4x2 pixels but"), std::string::npos)
      << sizes.status().message();
  const std::string flat = make_dir(::testing::TempDir() + "folder_flat");
  std::ofstream(flat + "/x.png") << "loose file";
  auto no_classes = load_image_folder(flat);
  ASSERT_FALSE(no_classes.is_ok());
  EXPECT_NE(no_classes.status().message().find("no class subfolders"), std::string::npos);
  auto missing = load_image_folder(::testing::TempDir() + "folder_missing");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
}

TEST(ImageFolder, SkipBadLeavesOutUnreadableAndMisSizedImagesAndCountsThem) {
  const std::string root = gray_folder("folder_skip", {"a", "b"}, 2);
  write_png(root + "/a/wide.png", 4, 2, false, std::vector<uint8_t>(8, 1));  // sorted last in a/
  std::ofstream(root + "/b/broken.png") << "not a png";                       // sorted first in b/
  BadSamples bad{.skip = true};
  auto d = load_image_folder(root, {}, 0, &bad);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->count, 4);  // the 2 + 2 good images, labels intact
  EXPECT_EQ(d->labels, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(bad.count, 2);
  EXPECT_NE(bad.first.find("wide.png is 4x2 pixels"), std::string::npos) << bad.first;
  EXPECT_NE(bad.summary().find("; 2 bad samples skipped (first: "), std::string::npos) << bad.summary();
  // Without skipping, the first bad image is the error, as before.
  BadSamples strict;
  EXPECT_FALSE(load_image_folder(root, {}, 0, &strict).is_ok());
  // A class left without any usable image is still an error, naming what was skipped.
  const std::string lone = gray_folder("folder_skip_lone", {"a"}, 1);
  make_dir(lone + "/c");
  std::ofstream(lone + "/c/x.png") << "junk";
  BadSamples all_bad{.skip = true};
  auto none = load_image_folder(lone, {}, 0, &all_bad);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("class folder 'c' holds no usable image (--skip-bad; 1 bad sample skipped"),
            std::string::npos)
      << none.status().message();
}

TEST(SplitOff, HoldsOutAFixedDisjointShareOfTheWhole) {
  const std::string root = gray_folder("folder_split", {"a", "b", "c", "d"}, 5);
  auto d = load_image_folder(root);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  auto s = split_off(*d, 0.25);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->first.count, 15);
  EXPECT_EQ(s->second.count, 5);
  // Every sample lands in exactly one part (pixels identify a sample).
  std::map<std::vector<uint8_t>, int> seen;
  for (const ImageDataset* part : {&s->first, &s->second})
    for (int64_t i = 0; i < part->count; ++i) ++seen[std::vector<uint8_t>(part->image(i), part->image(i) + 6)];
  EXPECT_EQ(seen.size(), 20u);
  for (const auto& [px, n] : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(s->second.class_names, d->class_names);
  // The same split every time.
  auto again = split_off(*d, 0.25);
  EXPECT_EQ(again->second.images, s->second.images);
  EXPECT_FALSE(split_off(*d, 0.0).is_ok());
  EXPECT_FALSE(split_off(*d, 1.0).is_ok());
  EXPECT_FALSE(split_off(d->subset(1), 0.5).is_ok());  // nothing would be left to train on
}

}  // namespace
}  // namespace mixprec
