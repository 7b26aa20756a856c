// image_file_test.cpp: JPEG decoding against JPEGs written here by libjpeg's own encoder:
// a whole file decodes to (close to) the pixels encoded; a file cut inside its scan, or whose
// scan is cut and closed with an end-of-image marker, is refused as data_loss naming the file
// (libjpeg only warns about those and fills the missing rows with gray, which predict, serve
// and folder training accepted as an image), and --skip-bad leaves such a file out of a folder.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "unit/data/data_test_util.h"
#include "mixprec/data/data.h"
#include "mixprec/data/image.h"

namespace mixprec {
namespace {

using testing_data::TempDir;

// A w x h JPEG of `pixels` (gray or RGB, row-major), quality 95, baseline.
std::string encode_jpeg(int w, int h, int channels, const std::vector<uint8_t>& pixels) {
  jpeg_compress_struct c;
  jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + size_t(c.next_scanline) * size_t(w * channels);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<const char*>(buf), size);
  std::free(buf);
  return out;
}

// Gradients with sharp wrap-around edges, so that the scan is most of the file (detailed),
// or smooth ones, which JPEG keeps within a few levels (to check the decoded pixels).
std::vector<uint8_t> test_pixels(int w, int h, int channels, bool detailed = true) {
  std::vector<uint8_t> px(size_t(w * h * channels));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < channels; ++k)
        px[size_t((y * w + x) * channels + k)] =
            detailed ? uint8_t((x * 5 + y * 3 + k * 60) % 256) : uint8_t(20 + 2 * x + 2 * y + 40 * k);
  return px;
}

// Offset just past the start-of-scan segment (FF DA, then its length): the entropy-coded data.
size_t scan_start(const std::string& jpeg) {
  for (size_t i = 2; i + 3 < jpeg.size(); ++i)
    if (uint8_t(jpeg[i]) == 0xFF && uint8_t(jpeg[i + 1]) == 0xDA)
      return i + 2 + (size_t(uint8_t(jpeg[i + 2])) << 8 | uint8_t(jpeg[i + 3]));
  return std::string::npos;
}

TEST(JpegFile, AWholeFileDecodesToThePixelsEncoded) {
  for (int channels : {1, 3}) {
    const auto px = test_pixels(40, 32, channels, /*detailed=*/false);
    auto img = decode_image_bytes(encode_jpeg(40, 32, channels, px), "whole.jpg");
    ASSERT_TRUE(img.is_ok()) << img.status().message();
    EXPECT_EQ(img->width, 40);
    EXPECT_EQ(img->height, 32);
    EXPECT_EQ(img->channels, channels);
    ASSERT_EQ(img->pixels.size(), px.size());
    double diff = 0;
    for (size_t i = 0; i < px.size(); ++i) diff += std::abs(int(img->pixels[i]) - int(px[i]));
    EXPECT_LT(diff / double(px.size()), 4.0) << "mean absolute difference, quality 95";
  }
}

TEST(JpegFile, AFileCutInsideItsScanIsADataErrorNamingTheFile) {
  for (int channels : {1, 3}) {
    SCOPED_TRACE(channels);
    const std::string jpeg = encode_jpeg(40, 32, channels, test_pixels(40, 32, channels));
    const size_t scan = scan_start(jpeg);
    ASSERT_NE(scan, std::string::npos);
    ASSERT_GT(jpeg.size() - scan, 200u) << "the scan should be most of the file";
    // Cut at a quarter, half and three quarters of the scan.
    for (size_t cut : {scan + (jpeg.size() - scan) / 4, scan + (jpeg.size() - scan) / 2,
                       scan + 3 * (jpeg.size() - scan) / 4}) {
      SCOPED_TRACE(cut);
      auto img = decode_image_bytes(jpeg.substr(0, cut), "cut.jpg");
      ASSERT_FALSE(img.is_ok()) << "a JPEG cut at byte " << cut << " of " << jpeg.size() << " was accepted";
      EXPECT_EQ(img.status().code(), StatusCode::data_loss);
      EXPECT_NE(img.status().message().find("image file 'cut.jpg': JPEG: Premature end of JPEG file"),
                std::string::npos)
          << img.status().message();
      // The same bytes closed with an end-of-image marker: the scan still ends early.
      auto closed = decode_image_bytes(jpeg.substr(0, cut) + "\xff\xd9", "closed.jpg");
      ASSERT_FALSE(closed.is_ok()) << "a cut scan closed with EOI was accepted";
      EXPECT_EQ(closed.status().code(), StatusCode::data_loss);
      EXPECT_NE(closed.status().message().find("'closed.jpg': JPEG: Corrupt JPEG data"), std::string::npos)
          << closed.status().message();
    }
  }
}

TEST(JpegFile, SkipBadLeavesATruncatedJpegOutOfAFolder) {
  TempDir dir;
  const std::string jpeg = encode_jpeg(16, 12, 1, test_pixels(16, 12, 1));
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::filesystem::create_directories(std::filesystem::path(dir.file(name)).parent_path());
    std::ofstream(dir.file(name), std::ios::binary) << bytes;
  };
  write("a/0.jpg", jpeg);
  write("a/1.jpg", jpeg.substr(0, scan_start(jpeg) + 20));
  write("b/0.jpg", jpeg);
  auto strict = load_image_folder(dir.path());
  ASSERT_FALSE(strict.is_ok());
  EXPECT_EQ(strict.status().code(), StatusCode::data_loss);
  EXPECT_NE(strict.status().message().find(dir.file("a/1.jpg")), std::string::npos) << strict.status().message();
  BadSamples bad{.skip = true};
  auto skipped = load_image_folder(dir.path(), {}, 0, &bad);
  ASSERT_TRUE(skipped.is_ok()) << skipped.status().message();
  EXPECT_EQ(skipped->count, 2);
  EXPECT_EQ(bad.count, 1);
  EXPECT_NE(bad.first.find("a/1.jpg': JPEG: Premature end of JPEG file"), std::string::npos) << bad.first;
}

}  // namespace
}  // namespace mixprec
