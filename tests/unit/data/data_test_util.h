// data_test_util.h: fixtures for the data-layer tests, built at run time in a temp dir.
// The gzip writer is our own (stored blocks, or a hand-coded fixed-Huffman run of zeros for
// the bomb) so that the reader's zlib path is checked against an independent encoder.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mixprec::testing_data {

using Bytes = std::vector<uint8_t>;

// A fresh directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mixprec_data_XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes bytes to name inside the dir; returns the full path.
  std::string write(const std::string& name, const Bytes& bytes) const {
    std::string p = file(name);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    EXPECT_TRUE(f.good()) << "could not write " << p;
    return p;
  }

 private:
  std::string path_;
};

inline void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}
inline void put_le32(Bytes& b, uint32_t v) {
  for (int s = 0; s <= 24; s += 8) b.push_back(uint8_t(v >> s));
}

// IDX images: magic, count, rows, cols (big-endian), then the pixels as given.
inline Bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels,
                        uint32_t magic = 0x00000803) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, count);
  put_be32(b, rows);
  put_be32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}
// IDX labels: magic, count, then the labels.
inline Bytes idx_labels(const Bytes& labels, uint32_t magic = 0x00000801) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, uint32_t(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}
// Pixel i of a synthetic image set: a pattern that makes misplaced bytes visible.
inline Bytes pattern_pixels(size_t n) {
  Bytes p(n);
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t((i * 7 + 3) % 251);
  return p;
}

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), bit by bit from the definition.
class Crc32 {
 public:
  void update(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      crc_ ^= p[i];
      for (int k = 0; k < 8; ++k) crc_ = (crc_ >> 1) ^ (0xEDB88320u & (0u - (crc_ & 1u)));
    }
  }
  uint32_t value() const { return ~crc_; }

 private:
  uint32_t crc_ = 0xFFFFFFFFu;
};

inline void gzip_header(Bytes& out) {
  // ID1 ID2, CM=8 (deflate), FLG=0, MTIME=0, XFL=0, OS=255 (unknown).
  for (uint8_t b : {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}) out.push_back(b);
}

// RFC 1952 gzip member whose deflate data are stored (uncompressed) blocks of <= 65535 bytes.
inline Bytes gzip_stored(const Bytes& data) {
  Bytes out;
  gzip_header(out);
  size_t pos = 0;
  do {
    size_t len = std::min<size_t>(65535, data.size() - pos);
    bool final = pos + len == data.size();
    out.push_back(final ? 1 : 0);  // BFINAL, BTYPE=00, then padding to the byte boundary
    out.push_back(uint8_t(len));
    out.push_back(uint8_t(len >> 8));
    out.push_back(uint8_t(~len));
    out.push_back(uint8_t(~len >> 8));
    out.insert(out.end(), data.begin() + long(pos), data.begin() + long(pos + len));
    pos += len;
  } while (pos < data.size());
  Crc32 crc;
  crc.update(data.data(), data.size());
  put_le32(out, crc.value());
  put_le32(out, uint32_t(data.size()));
  return out;
}

// LSB-first bit packing as deflate wants it (RFC 1951 3.1.1).
class BitWriter {
 public:
  void bits(uint32_t value, int n) {  // header fields: least significant bit first
    for (int i = 0; i < n; ++i) put((value >> i) & 1);
  }
  void code(uint32_t code, int len) {  // Huffman codes: most significant bit first
    for (int i = len - 1; i >= 0; --i) put((code >> i) & 1);
  }
  Bytes finish() {
    if (nbits_ > 0) out_.push_back(cur_);
    return out_;
  }

 private:
  void put(uint32_t bit) {
    cur_ |= uint8_t(bit << nbits_);
    if (++nbits_ == 8) {
      out_.push_back(cur_);
      cur_ = 0;
      nbits_ = 0;
    }
  }
  Bytes out_;
  uint8_t cur_ = 0;
  int nbits_ = 0;
};

// gzip member inflating to `prefix` followed by 1 + 258 * runs zero bytes, using fixed
// Huffman codes (RFC 1951 3.2.6): literal 0, then `runs` copies of <length 258, distance 1>
// (13 bits each for 258 bytes: a ~160x bomb). With valid_trailer false the CRC32 is wrong,
// so a reader that inflates to the very end reports a checksum error.
inline Bytes gzip_zero_bomb(const Bytes& prefix, uint64_t runs, bool valid_trailer = true) {
  BitWriter w;
  w.bits(1, 1);  // BFINAL
  w.bits(1, 2);  // BTYPE = 01, fixed Huffman
  auto literal = [&](uint32_t lit) {
    if (lit < 144) w.code(0x30 + lit, 8);
    else w.code(0x190 + (lit - 144), 9);
  };
  for (uint8_t b : prefix) literal(b);
  literal(0);
  for (uint64_t i = 0; i < runs; ++i) {
    w.code(0xC0 + (285 - 280), 8);  // length code 285 = 258, no extra bits
    w.code(0, 5);                   // distance code 0 = distance 1
  }
  w.code(0, 7);  // end of block (256)
  Bytes out;
  gzip_header(out);
  Bytes deflated = w.finish();
  out.insert(out.end(), deflated.begin(), deflated.end());
  uint64_t n_zeros = 1 + 258 * runs;
  Crc32 crc;
  if (valid_trailer) {
    crc.update(prefix.data(), prefix.size());
    const uint8_t zero = 0;
    for (uint64_t i = 0; i < n_zeros; ++i) crc.update(&zero, 1);
  }
  put_le32(out, valid_trailer ? crc.value() : ~crc.value());
  put_le32(out, uint32_t(prefix.size() + n_zeros));
  return out;
}

}  // namespace mixprec::testing_data
