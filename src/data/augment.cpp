// augment.cpp: random crop with zero padding and horizontal flip of training images
// (torchvision's RandomCrop(size, padding) and RandomHorizontalFlip()), drawn per sample from
// (seed, epoch, sample index) alone, so a batch is the same whether it was built ahead on the
// loader's thread or not, and after a resume.
#include "mixprec/data/data.h"

namespace mixprec {
namespace {

// SplitMix64's finaliser (Steele et al.): a bijective mix, so nearby inputs give unrelated draws.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

AugmentDraw augment_draw(const Augmentation& a, uint64_t seed, int64_t epoch, int64_t index) {
  const uint64_t x = mix(mix(mix(seed) ^ uint64_t(epoch)) ^ uint64_t(index));
  AugmentDraw d;
  // Offsets in [0, 2 * padding]; the modulo bias is below 2^-20 for any padding <= 64.
  const uint64_t span = uint64_t(2 * a.crop_padding + 1);
  d.dy = a.crop_padding > 0 ? int64_t((x & 0xFFFFFFFFull) % span) : a.crop_padding;
  d.dx = a.crop_padding > 0 ? int64_t((x >> 32 & 0x7FFFFFFFull) % span) : a.crop_padding;
  d.flip = a.hflip && (x >> 63) != 0;
  return d;
}

void augment_image(const uint8_t* src, int64_t channels, int64_t height, int64_t width, int64_t padding,
                   const AugmentDraw& d, uint8_t* dst) {
  // Output (y, x) is padded-image (y + dy, x' + dx) with x' the flipped column; the padded
  // image is the source shifted by `padding`, zero outside it.
  const int64_t oy = d.dy - padding, ox = d.dx - padding;
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* plane = src + c * height * width;
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = y + oy;
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = (d.flip ? width - 1 - x : x) + ox;
        *dst++ = sy >= 0 && sy < height && sx >= 0 && sx < width ? plane[sy * width + sx] : 0;
      }
    }
  }
}

}  // namespace mixprec
