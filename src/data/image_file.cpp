// image_file.cpp: see mixprec/data/image.h.
#include "mixprec/data/image.h"

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unistd.h>

#include "mixprec/io/files.h"

namespace mixprec {

namespace {

Status bad(const std::string& path, const std::string& what) {
  return Status::data_loss("image file '" + path + "': " + what);
}

StatusOr<DecodedImage> decode_png(const std::string& path, const std::string& bytes, int64_t max_side) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    return bad(path, std::string("not a readable PNG: ") + image.message);
  if (image.width == 0 || image.height == 0 || int64_t(image.width) > max_side || int64_t(image.height) > max_side) {
    png_image_free(&image);
    return bad(path, "size " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                         ", expected 1 to " + std::to_string(max_side) + " pixels a side");
  }
  const bool color = (image.format & PNG_FORMAT_FLAG_COLOR) != 0;
  image.format = color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;  // 8-bit, alpha dropped
  DecodedImage out;
  out.width = image.width;
  out.height = image.height;
  out.channels = color ? 3 : 1;
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    return bad(path, "PNG data: " + why);
  }
  return out;
}

// libjpeg reports errors through longjmp: the handler jumps back here with its message.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
void jpeg_fail(j_common_ptr info) {
  auto* err = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, err->message);
  std::longjmp(err->jump, 1);
}

// libjpeg only warns about damaged image data (a file truncated inside its scan: "Premature
// end of JPEG file"; a bad Huffman code; a lost restart marker) and goes on, filling what it
// could not decode with gray: the image "decodes". Such a warning is an error here. The
// warnings that leave every pixel decoded (a JFIF revision it does not know, an Adobe colour
// transform code, a bad ICC profile, which is not read, stray bytes between markers) stay
// silent, as before.
bool pixels_intact(int code) {
  return code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC ||
         code == JWRN_EXTRANEOUS_DATA;
}
void jpeg_message(j_common_ptr info, int level) {
  if (level >= 0) return;  // trace messages: never printed
  if (pixels_intact(info->err->msg_code)) return;
  jpeg_fail(info);  // the message, then back to decode_jpeg's setjmp
}

StatusOr<DecodedImage> decode_jpeg(const std::string& path, const std::string& bytes, int64_t max_side) {
  jpeg_decompress_struct info;
  JpegError err;
  info.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.output_message = [](j_common_ptr) {};  // nothing is printed
  err.mgr.emit_message = jpeg_message;
  DecodedImage out;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&info);
    return bad(path, std::string("JPEG: ") + err.message + " (a corrupt or truncated file)");
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  if (int64_t(info.image_width) > max_side || int64_t(info.image_height) > max_side) {
    jpeg_destroy_decompress(&info);
    return bad(path, "size " + std::to_string(info.image_width) + "x" + std::to_string(info.image_height) +
                         ", expected at most " + std::to_string(max_side) + " pixels a side");
  }
  info.out_color_space = info.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  out.width = info.output_width;
  out.height = info.output_height;
  out.channels = info.output_components;
  out.pixels.resize(size_t(out.width * out.height * out.channels));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.pixels.data() + size_t(info.output_scanline) * size_t(out.width * out.channels);
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return out;
}

bool is_png(const std::string& b) { return b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0; }
bool is_jpeg(const std::string& b) { return b.size() >= 3 && std::memcmp(b.data(), "\xff\xd8\xff", 3) == 0; }

}  // namespace

bool looks_like_image(const std::string& path) {
  auto fd = io::open_regular_file(path, "image file");  // a FIFO is refused, never waited on
  if (!fd.is_ok()) return false;
  char head[8] = {};
  const ssize_t n = ::read(*fd, head, sizeof head);
  ::close(*fd);
  const std::string b(head, n > 0 ? size_t(n) : 0);
  return is_png(b) || is_jpeg(b);
}

StatusOr<DecodedImage> decode_image_file(const std::string& path) {
  // Through the regular-file check (a FIFO is refused, not waited on), at most 256 MiB.
  auto bytes = io::read_regular_file(path, "image file", uint64_t(1) << 28);
  if (!bytes.is_ok()) return bytes.status();
  return decode_image_bytes(*bytes, path);
}

StatusOr<DecodedImage> decode_image_bytes(const std::string& bytes, const std::string& name, int64_t max_side) {
  max_side = std::min(max_side, kMaxDecodedImageSide);
  if (is_png(bytes)) return decode_png(name, bytes, max_side);
  if (is_jpeg(bytes)) return decode_jpeg(name, bytes, max_side);
  return bad(name, "neither a PNG nor a JPEG (by its first bytes)");
}

std::vector<uint8_t> to_chw(const DecodedImage& image, int64_t channels) {
  const int64_t hw = image.width * image.height;
  std::vector<uint8_t> out(size_t(channels * hw));
  for (int64_t p = 0; p < hw; ++p) {
    const uint8_t* px = image.pixels.data() + p * image.channels;
    if (channels == 1) {
      out[size_t(p)] = image.channels == 1
                           ? px[0]
                           : uint8_t(std::lround(0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2]));
    } else {
      for (int64_t c = 0; c < channels; ++c) out[size_t(c * hw + p)] = image.channels == 1 ? px[0] : px[c];
    }
  }
  return out;
}

}  // namespace mixprec
