// augment_test.cpp: training-image augmentation (data.h). augment_image against a reference
// written the long way (build the zero-padded image, crop it, flip the crop: torchvision's
// RandomCrop(padding) then RandomHorizontalFlip) for every offset and both flips; the draws
// cover every offset and flip about half the time, and depend only on (seed, epoch, index);
// the DataLoader applies exactly the draw of each sample, with or without its background
// thread and when an epoch is resumed mid-way; text refuses augmentation.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

std::vector<uint8_t> reference(const std::vector<uint8_t>& src, int64_t C, int64_t H, int64_t W, int64_t pad,
                               const AugmentDraw& d) {
  const int64_t PH = H + 2 * pad, PW = W + 2 * pad;
  std::vector<uint8_t> padded(size_t(C * PH * PW), 0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) padded[size_t((c * PH + y + pad) * PW + x + pad)] = src[size_t((c * H + y) * W + x)];
  std::vector<uint8_t> crop(size_t(C * H * W));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) crop[size_t((c * H + y) * W + x)] = padded[size_t((c * PH + y + d.dy) * PW + x + d.dx)];
  if (!d.flip) return crop;
  std::vector<uint8_t> flipped(crop.size());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) flipped[size_t((c * H + y) * W + x)] = crop[size_t((c * H + y) * W + W - 1 - x)];
  return flipped;
}

TEST(Augment, CropAndFlipEqualPadThenCropThenFlip) {
  const int64_t C = 3, H = 5, W = 7, pad = 3;
  std::vector<uint8_t> src(size_t(C * H * W));
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(1 + i * 37 % 251);  // no zeros: padding shows
  std::vector<uint8_t> out(src.size());
  for (int64_t dy = 0; dy <= 2 * pad; ++dy)
    for (int64_t dx = 0; dx <= 2 * pad; ++dx)
      for (bool flip : {false, true}) {
        const AugmentDraw d{dy, dx, flip};
        augment_image(src.data(), C, H, W, pad, d, out.data());
        ASSERT_EQ(out, reference(src, C, H, W, pad, d)) << "dy " << dy << " dx " << dx << " flip " << flip;
      }
  // The centre offset without a flip is the image itself.
  augment_image(src.data(), C, H, W, pad, AugmentDraw{pad, pad, false}, out.data());
  EXPECT_EQ(out, src);
}

TEST(Augment, DrawsCoverEveryOffsetFlipHalfTheTimeAndDependOnlyOnSeedEpochIndex) {
  const Augmentation a{.crop_padding = 4, .hflip = true};
  std::set<int64_t> dys, dxs;
  int flips = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const AugmentDraw d = augment_draw(a, 7, 2, i);
    ASSERT_GE(d.dy, 0);
    ASSERT_LE(d.dy, 8);
    ASSERT_GE(d.dx, 0);
    ASSERT_LE(d.dx, 8);
    dys.insert(d.dy);
    dxs.insert(d.dx);
    flips += d.flip;
    const AugmentDraw again = augment_draw(a, 7, 2, i);
    ASSERT_TRUE(again.dy == d.dy && again.dx == d.dx && again.flip == d.flip);
  }
  EXPECT_EQ(dys.size(), 9u);
  EXPECT_EQ(dxs.size(), 9u);
  EXPECT_NEAR(double(flips) / n, 0.5, 0.02);
  // Another epoch or seed draws differently (most samples change).
  int same_epoch = 0, same_seed = 0;
  for (int i = 0; i < 1000; ++i) {
    const AugmentDraw d = augment_draw(a, 7, 2, i), e = augment_draw(a, 7, 3, i), s = augment_draw(a, 8, 2, i);
    same_epoch += d.dy == e.dy && d.dx == e.dx && d.flip == e.flip;
    same_seed += d.dy == s.dy && d.dx == s.dx && d.flip == s.flip;
  }
  EXPECT_LT(same_epoch, 50);
  EXPECT_LT(same_seed, 50);
  // Off: the identity.
  const AugmentDraw off = augment_draw(Augmentation{}, 7, 2, 5);
  EXPECT_TRUE(off.dy == 0 && off.dx == 0 && !off.flip);
}

ImageDataset small_images() {
  ImageDataset d = make_synthetic(50, 2, 6, 5, 3, 11);
  return d;
}

std::vector<std::vector<double>> epoch_batches(DataLoader& loader, int64_t epoch, int64_t start) {
  EXPECT_TRUE(loader.begin_epoch(epoch, start).is_ok());
  std::vector<std::vector<double>> out;
  while (auto b = loader.next()) out.push_back(b->images.to_vector_f64());
  return out;
}

TEST(Augment, TheLoaderAppliesEachSamplesDrawWithOrWithoutPrefetchAndOnResume) {
  auto d = std::make_shared<const ImageDataset>(small_images());
  const Augmentation a{.crop_padding = 2, .hflip = true};
  DataLoaderOptions o{.batch_size = 8, .shuffle = true, .seed = 3, .prefetch = 2, .normalize = false, .augment = a};
  DataLoader ahead(d, o);
  o.prefetch = 0;
  DataLoader inline_(d, o);
  const auto a1 = epoch_batches(ahead, 1, 0), b1 = epoch_batches(inline_, 1, 0);
  ASSERT_EQ(a1, b1);
  // Resumed at batch 3: the same batches from there on.
  const auto resumed = epoch_batches(ahead, 1, 3);
  ASSERT_EQ(resumed.size(), a1.size() - 3);
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], a1[i + 3]) << "batch " << i + 3;
  // Each sample is its source image with its own draw (pixels / 255, unnormalised).
  const std::vector<int64_t> order = ahead.epoch_order(1);
  const int64_t sb = d->sample_bytes();
  std::vector<uint8_t> want(static_cast<size_t>(sb));
  int changed = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t s = order[k];
    augment_image(d->image(s), d->channels, d->height, d->width, 2, augment_draw(a, 3, 1, s), want.data());
    const std::vector<double>& batch = a1[k / 8];
    for (int64_t p = 0; p < sb; ++p)
      ASSERT_EQ(batch[size_t(int64_t(k % 8) * sb + p)], float(want[size_t(p)] / 255.0)) << "sample " << s;
    changed += !std::equal(want.begin(), want.end(), d->image(s));
  }
  EXPECT_GT(changed, 25);  // the augmentation did something to most samples
}

TEST(Augment, TextAndNegativePaddingAreRefused) {
  ImageDataset text = small_images();
  text.text = true;
  EXPECT_THROW(DataLoader(text, DataLoaderOptions{.augment = {.hflip = true}}), Error);
  EXPECT_THROW(DataLoader(small_images(), DataLoaderOptions{.augment = {.crop_padding = -1}}), Error);
}

}  // namespace
}  // namespace mixprec
