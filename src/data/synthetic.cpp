// synthetic.cpp: a learnable stand-in dataset for tests, benchmarks and machines without
// real data. Class k has a blocky prototype (a 4x4 grid of random levels per channel,
// stretched over the image, so it survives convolution + pooling); a sample is 5/8 of its
// prototype plus 3/8 uniform noise, so classes overlap in single pixels but not as images.
#include <random>

#include <fmt/format.h>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {
constexpr int64_t kGrid = 4;
// Draws only through mt19937_64's raw output (fully specified by the standard) so that a
// seed gives the same dataset with every standard library.
uint8_t draw_byte(std::mt19937_64& rng) { return uint8_t(rng() >> 56); }
int draw_below(std::mt19937_64& rng, int n) {  // multiply-shift: bias < n / 2^32
  return int(((rng() >> 32) * uint64_t(n)) >> 32);
}
}  // namespace

ImageDataset make_synthetic(int64_t count, int64_t channels, int64_t height, int64_t width,
                            int num_classes, uint64_t seed) {
  if (count < 0 || channels < 1 || height < 1 || width < 1 || num_classes < 1 ||
      num_classes > 256 || height > kMaxImageSide || width > kMaxImageSide || channels > 64)
    throw Error(Status::invalid_argument(fmt::format(
        "make_synthetic: count {}, shape {}x{}x{}, classes {}: expected count >= 0, "
        "1 <= C <= 64, 1 <= H, W <= {}, 1 <= classes <= 256",
        count, channels, height, width, num_classes, kMaxImageSide)));
  const int64_t sample = channels * height * width;
  if (count > kMaxDatasetBytes / sample)
    throw Error(Status::invalid_argument(fmt::format(
        "make_synthetic: {} samples of {} bytes: expected at most {} bytes in total", count,
        sample, kMaxDatasetBytes)));

  std::mt19937_64 rng(seed);
  // prototypes[k][c][gy][gx]
  std::vector<uint8_t> prototypes(size_t(num_classes * channels * kGrid * kGrid));
  for (auto& v : prototypes) v = draw_byte(rng);

  ImageDataset ds;
  ds.count = count;
  ds.channels = channels;
  ds.height = height;
  ds.width = width;
  ds.num_classes = num_classes;
  ds.name = "synthetic";
  ds.source = fmt::format("synthetic(count={}, shape={}x{}x{}, classes={}, seed={})", count,
                          channels, height, width, num_classes, seed);
  ds.images.resize(size_t(count * sample));
  ds.labels.resize(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    int k = draw_below(rng, num_classes);
    ds.labels[size_t(i)] = uint8_t(k);
    uint8_t* dst = ds.images.data() + i * sample;
    for (int64_t c = 0; c < channels; ++c) {
      const uint8_t* proto = prototypes.data() + (k * channels + c) * kGrid * kGrid;
      for (int64_t y = 0; y < height; ++y) {
        for (int64_t x = 0; x < width; ++x) {
          int p = proto[(y * kGrid / height) * kGrid + x * kGrid / width];
          int noise = draw_byte(rng);
          *dst++ = uint8_t((5 * p + 3 * noise) / 8);  // <= 255: a convex blend
        }
      }
    }
  }
  compute_channel_stats(ds, ds.mean, ds.stddev);
  // A constant channel (1x1 images, one class) would have std 0; keep normalisation finite.
  for (auto& s : ds.stddev)
    if (!(s > 0)) s = 1.0;
  return ds;
}

}  // namespace mixprec
