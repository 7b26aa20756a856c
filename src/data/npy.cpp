// data/npy.cpp: see mixprec/data/npy.h. The header is a Python dict literal; only the three keys
// NumPy writes are accepted, parsed by a small tokenizer (no general Python parsing).
#include "mixprec/data/npy.h"

#include <cctype>
#include <cstring>
#include <limits>

#include "io/byte_source.h"

namespace mixprec {

namespace {

constexpr uint64_t kMaxNpyBytes = uint64_t(1) << 31;  // 2 GiB: far above any input to predict

struct Cursor {
  const std::string& text;
  size_t pos = 0;
  void skip_space() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n')) ++pos;
  }
  bool eat(char c) {
    skip_space();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool quoted(std::string& out) {
    skip_space();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) return false;
    const char q = text[pos++];
    const size_t end = text.find(q, pos);
    if (end == std::string::npos) return false;
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool word(std::string& out) {
    skip_space();
    const size_t start = pos;
    while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) ++pos;
    out = text.substr(start, pos - start);
    return !out.empty();
  }
  bool integer(int64_t& out) {
    skip_space();
    const size_t start = pos;
    int64_t v = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      v = v * 10 + (text[pos++] - '0');
    }
    if (pos == start) return false;
    out = v;
    return true;
  }
};

struct Kind {
  char type;  // 'u', 'i', 'f'
  int bytes;
};

}  // namespace

StatusOr<NpyArray> parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  auto bad = [&](const std::string& what) { return Status::data_loss("npy file '" + name + "': " + what); };
  auto unsupported = [&](const std::string& what) {
    return Status::invalid_argument("npy file '" + name + "': " + what);
  };
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0)
    return bad("magic: expected \\x93NUMPY at the start (not a .npy file, or truncated)");
  const int major = data[6];
  if (major < 1 || major > 3 || data[7] != 0)
    return bad("version " + std::to_string(major) + "." + std::to_string(data[7]) + ": expected 1.0, 2.0 or 3.0");
  uint64_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = uint64_t(data[8]) | uint64_t(data[9]) << 8;
    header_at = 10;
  } else {
    if (size < 12) return bad("truncated before the header length");
    header_len = uint64_t(data[8]) | uint64_t(data[9]) << 8 | uint64_t(data[10]) << 16 | uint64_t(data[11]) << 24;
    header_at = 12;
  }
  if (header_len > size - header_at)
    return bad("header length " + std::to_string(header_len) + " runs past the end of the file (" +
               std::to_string(size) + " bytes; truncated?)");
  const std::string header(reinterpret_cast<const char*>(data + header_at), size_t(header_len));

  Cursor c{header};
  if (!c.eat('{')) return bad("header: expected a dict '{...}'");
  std::string descr;
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::vector<int64_t> shape;
  while (!c.eat('}')) {
    std::string key;
    if (!c.quoted(key)) return bad("header: expected a quoted key");
    if (!c.eat(':')) return bad("header: expected ':' after '" + key + "'");
    if (key == "descr" && !have_descr) {
      if (!c.quoted(descr)) return bad("header field 'descr': expected a quoted dtype such as '<f4'");
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      std::string w;
      if (!c.word(w) || (w != "True" && w != "False")) return bad("header field 'fortran_order': expected True or False");
      fortran = w == "True";
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      if (!c.eat('(')) return bad("header field 'shape': expected a tuple '(...)'");
      while (!c.eat(')')) {
        int64_t d = 0;
        if (!c.integer(d)) return bad("header field 'shape': expected non-negative integers");
        if (shape.size() >= 32) return bad("header field 'shape': more than 32 dimensions");
        shape.push_back(d);
        if (!c.eat(',') && !(c.skip_space(), c.pos < header.size() && header[c.pos] == ')'))
          return bad("header field 'shape': expected ',' or ')'");
      }
      have_shape = true;
    } else {
      return bad("header: unexpected or repeated key '" + key + "' (expected descr, fortran_order, shape)");
    }
    if (!c.eat(',')) {
      if (!c.eat('}')) return bad("header: expected ',' or '}'");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    return bad(std::string("header: missing field '") + (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") + "'");
  if (fortran) return unsupported("header field 'fortran_order': True (Fortran order) is not supported; save a C-order array");
  const char endian = descr.empty() ? '?' : descr[0];
  const Kind kind{descr.size() > 1 ? descr[1] : '?', descr.size() > 2 ? std::atoi(descr.c_str() + 2) : 0};
  const bool known = (kind.type == 'u' && (kind.bytes == 1 || kind.bytes == 2 || kind.bytes == 4 || kind.bytes == 8)) ||
                     (kind.type == 'i' && (kind.bytes == 1 || kind.bytes == 2 || kind.bytes == 4 || kind.bytes == 8)) ||
                     (kind.type == 'f' && (kind.bytes == 4 || kind.bytes == 8));
  if (!known || descr != std::string(1, endian) + kind.type + std::to_string(kind.bytes))
    return unsupported("header field 'descr': dtype '" + descr + "' is not supported (expected one of u1 u2 u4 u8 i1 i2 i4 i8 f4 f8)");
  if (endian == '>' && kind.bytes > 1) return unsupported("header field 'descr': big-endian '" + descr + "' is not supported");
  if (endian != '<' && endian != '|' && endian != '=' && !(endian == '>' && kind.bytes == 1))
    return bad("header field 'descr': unknown byte order '" + std::string(1, endian) + "'");

  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > kMaxNpyBytes / uint64_t(d)) return bad("header field 'shape': more than 2 GiB of data");
    count *= uint64_t(d);
  }
  const uint64_t bytes = count * uint64_t(kind.bytes);
  const uint64_t data_at = header_at + header_len;
  if (bytes != size - data_at)
    return bad("data: the shape and dtype need " + std::to_string(bytes) + " bytes, the file holds " +
               std::to_string(size - data_at) + (bytes > size - data_at ? " (truncated?)" : " (trailing bytes)"));

  NpyArray out;
  out.descr = descr;
  out.shape = shape;
  out.values.resize(size_t(count));
  const uint8_t* p = data + data_at;
  for (uint64_t i = 0; i < count; ++i, p += kind.bytes) {
    double v = 0;
    switch (kind.type) {
      case 'u': {
        uint64_t u = 0;
        std::memcpy(&u, p, size_t(kind.bytes));  // little-endian host
        v = double(u);
        break;
      }
      case 'i': {
        int64_t s = 0;
        std::memcpy(&s, p, size_t(kind.bytes));
        const int shift = 64 - 8 * kind.bytes;  // sign-extend
        v = double(shift ? (s << shift) >> shift : s);
        break;
      }
      default:
        if (kind.bytes == 4) {
          float f;
          std::memcpy(&f, p, 4);
          v = f;
        } else {
          std::memcpy(&v, p, 8);
        }
    }
    out.values[size_t(i)] = v;
  }
  return out;
}

StatusOr<NpyArray> read_npy(const std::string& path) {
  auto text = io::read_regular_file(path, "npy file", kMaxNpyBytes + 65536);
  if (!text.is_ok()) return text.status();
  return parse_npy(reinterpret_cast<const uint8_t*>(text->data()), text->size(), path);
}

}  // namespace mixprec
