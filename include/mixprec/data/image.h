// image.h: PNG and JPEG files decoded to 8-bit pixels, with Debian's libpng and libjpeg-turbo:
// what `mixprec predict` reads and what an image-folder dataset (data.h) is made of.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec {

struct DecodedImage {
  int64_t width = 0, height = 0, channels = 0;  // channels: 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;                  // HWC, row-major
};

// Decodes a PNG (any bit depth, palette, alpha: converted to 8-bit gray or RGB, alpha
// dropped) or baseline/progressive JPEG, chosen by the file's magic bytes, not its name.
// Images larger than 16384 x 16384 are refused before decoding. Errors: data_loss naming the
// file and what the decoder said; io_error/not_found for the file itself.
StatusOr<DecodedImage> decode_image_file(const std::string& path);

inline constexpr int64_t kMaxDecodedImageSide = 16384;

// The same for bytes in memory (a request body); `name` is what errors call them. An image
// wider or taller than max_side is refused from its header, before its pixels are allocated
// (a small compressed file can claim a huge image).
StatusOr<DecodedImage> decode_image_bytes(const std::string& bytes, const std::string& name,
                                          int64_t max_side = kMaxDecodedImageSide);

// True when the bytes start like a PNG or a JPEG.
bool looks_like_image(const std::string& path);

// `image` as C x H x W pixels for a model of `channels` channels: RGB to gray by ITU-R 601
// luma (0.299 R + 0.587 G + 0.114 B, what PIL's convert("L") does), gray to RGB by copying.
std::vector<uint8_t> to_chw(const DecodedImage& image, int64_t channels);

}  // namespace mixprec
