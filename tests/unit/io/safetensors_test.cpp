// safetensors_test.cpp: the safetensors writer against hand-built bytes, bit-exact round trips
// of every dtype, one hostile file per validation rule (each must be data_loss naming the file
// and the field), truncation at every byte, and all-or-nothing saves. Long because it holds
// one case per validation rule of the reader; each case is a few lines.
#include "mixprec/io/safetensors.h"

#include <gtest/gtest.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace mixprec {
namespace {

using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mixprec_st_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // Names in the directory that look like our temp files.
  std::vector<std::string> temp_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos)
        out.push_back(e.path().string());
    return out;
  }

 private:
  std::string path_;
};

Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(f.good()) << path;
}
void put_le64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
// A file from its raw parts: the length field says header.size() unless told otherwise.
Bytes make_file(const std::string& header, const Bytes& data = {},
                std::optional<uint64_t> claimed_len = std::nullopt) {
  Bytes b;
  put_le64(b, claimed_len.value_or(header.size()));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
Bytes raw_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return Bytes(p, p + t.numel() * int64_t(dtype_size(t.dtype())));
}
// A tensor whose bytes are exactly `bits` (little-endian element patterns).
Tensor tensor_from_bytes(const Bytes& bits, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  EXPECT_EQ(bits.size(), size_t(t.numel()) * dtype_size(dtype));
  if (!bits.empty()) std::memcpy(t.data(), bits.data(), bits.size());
  return t;
}
// Deterministic bytes independent of the engine's RNG.
Bytes pattern(size_t n, uint32_t seed) {
  Bytes b(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : b) {
    x = x * 1664525u + 1013904223u;
    v = uint8_t(x >> 24);
  }
  return b;
}

// ------------------------------------------------------------------------- round trips

TEST(SafetensorsRoundTrip, EveryDtypeIsBitExact) {
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<Bytes> expected;
  uint32_t seed = 1;
  for (DType d : kAllDTypes) {
    const Shape shape = {3, 5};
    Bytes bits = pattern(15 * dtype_size(d), seed++);
    // Special patterns that a value conversion would not preserve: a NaN with a payload,
    // negative zero, a subnormal (f32), the bf16/f16 NaN payload bits.
    if (d == DType::f32) {
      const uint32_t specials[] = {0x7fc01234u, 0x80000000u, 0x00000001u, 0xff800000u};
      std::memcpy(bits.data(), specials, sizeof(specials));
    } else if (d == DType::f16 || d == DType::bf16) {
      const uint16_t specials[] = {0x7e01, 0x8000, 0x0001, 0xfc00};
      std::memcpy(bits.data(), specials, sizeof(specials));
    }
    tensors.emplace_back(std::string("t_") + dtype_name(d), tensor_from_bytes(bits, shape, d));
    expected.push_back(bits);
  }
  ASSERT_TRUE(save_safetensors(path, tensors).is_ok());
  auto loaded = load_safetensors(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_EQ(loaded->tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor* t = loaded->find(tensors[i].first);
    ASSERT_NE(t, nullptr) << tensors[i].first;
    EXPECT_EQ(t->dtype(), tensors[i].second.dtype()) << tensors[i].first;
    EXPECT_EQ(t->shape(), (Shape{3, 5})) << tensors[i].first;
    EXPECT_TRUE(t->is_contiguous());
    EXPECT_EQ(raw_bytes(*t), expected[i]) << tensors[i].first;
  }
}

TEST(SafetensorsRoundTrip, ScalarsEmptyTensorsAndManyDims) {
  TempDir dir;
  const std::string path = dir.file("shapes.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"scalar", Tensor::scalar(2.5, DType::f64)},
      {"empty", Tensor::empty({0, 3}, DType::f32)},
      {"empty2", Tensor::empty({4, 0}, DType::i64)},
      {"six_d",
       tensor_from_bytes(pattern(2 * 1 * 3 * 1 * 2 * 2, 9), {2, 1, 3, 1, 2, 2}, DType::u8)},
  };
  ASSERT_TRUE(save_safetensors(path, tensors).is_ok());
  auto loaded = load_safetensors(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_NE(loaded->find("scalar"), nullptr);
  EXPECT_EQ(loaded->find("scalar")->shape(), Shape{});
  EXPECT_EQ(loaded->find("scalar")->item(), 2.5);
  EXPECT_EQ(loaded->find("empty")->shape(), (Shape{0, 3}));
  EXPECT_EQ(loaded->find("empty2")->shape(), (Shape{4, 0}));
  EXPECT_EQ(loaded->find("empty2")->dtype(), DType::i64);
  EXPECT_EQ(raw_bytes(*loaded->find("six_d")), pattern(24, 9));
}

TEST(SafetensorsRoundTrip, MetadataAndEmptyFile) {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"empty", ""},
                                                   {"quote\"and\\slash", "line\nbreak"},
                                                   {"utf8", "\xc3\xa9t\xc3\xa9"}};
  ASSERT_TRUE(save_safetensors(path, {}, meta).is_ok());
  auto loaded = load_safetensors(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_TRUE(loaded->tensors.empty());
  EXPECT_EQ(loaded->metadata, meta);
}

TEST(SafetensorsRoundTrip, SortedByNameAndFindWorks) {
  TempDir dir;
  const std::string path = dir.file("order.safetensors");
  ASSERT_TRUE(save_safetensors(path, {{"zeta", Tensor::from_vector({1}, {1})},
                                      {"alpha", Tensor::from_vector({2, 3}, {2})},
                                      {"mid", Tensor::from_vector({4}, {1})}})
                  .is_ok());
  auto loaded = load_safetensors(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_EQ(loaded->tensors.size(), 3u);
  EXPECT_EQ(loaded->tensors[0].first, "alpha");
  EXPECT_EQ(loaded->tensors[1].first, "mid");
  EXPECT_EQ(loaded->tensors[2].first, "zeta");
  EXPECT_EQ(loaded->find("alpha")->to_vector(), (std::vector<float>{2, 3}));
  EXPECT_EQ(loaded->find("nope"), nullptr);
}

TEST(SafetensorsRoundTrip, ChannelsLastIsStoredInLogicalOrder) {
  TempDir dir;
  const std::string path = dir.file("cl.safetensors");
  std::vector<float> values(2 * 3 * 2 * 2);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);  // logical NCHW index
  Tensor cl =
      Tensor::from_vector(values, {2, 3, 2, 2}).to_memory_format(MemoryFormat::channels_last);
  ASSERT_TRUE(cl.is_channels_last());
  ASSERT_TRUE(save_safetensors(path, {{"x", cl}}).is_ok());
  auto loaded = load_safetensors(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const Tensor& x = *loaded->find("x");
  ASSERT_TRUE(x.is_contiguous());
  const float* p = x.data_ptr<float>();
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(p[i], float(i)) << "element " << i;
}

TEST(SafetensorsRoundTrip, RejectsBadNamesWithInvalidArgument) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  Tensor t = Tensor::from_vector({1}, {1});
  EXPECT_EQ(save_safetensors(path, {{"a", t}, {"a", t}}).code(), StatusCode::invalid_argument);
  EXPECT_EQ(save_safetensors(path, {{"__metadata__", t}}).code(), StatusCode::invalid_argument);
  EXPECT_EQ(save_safetensors(path, {{"u", Tensor()}}).code(), StatusCode::invalid_argument);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(dir.temp_files().empty());
}

// ------------------------------------------------------------------------- exact bytes

// The "mixprec.checksums" entry for one tensor "w" = F32 [2] {1, -2} and metadata `md`,
// computed here from the format's definition (docs/checkpoints.md) with xxHash directly.
std::string checksum_entry_for_w(const std::map<std::string, std::string>& md) {
  std::string header_input;
  for (const auto& [k, v] : md) header_input += k + '\0' + v + '\0';
  std::string tensor_input = std::string("w") + '\0' + "F32" + '\0';
  const int64_t dim = 2;
  tensor_input.append(reinterpret_cast<const char*>(&dim), 8);
  for (uint8_t b : {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}) tensor_input.push_back(char(b));
  char h[17], t[17];
  std::snprintf(h, sizeof h, "%016llx", (unsigned long long)XXH3_64bits(header_input.data(), header_input.size()));
  std::snprintf(t, sizeof t, "%016llx", (unsigned long long)XXH3_64bits(tensor_input.data(), tensor_input.size()));
  return std::string(R"({\"algorithm\":\"xxh3-64\",\"header\":\")") + h + R"(\",\"tensors\":{\"w\":\")" + t + R"(\"}})";
}

// 8-byte little-endian length, then the header padded with spaces to a multiple of 8.
Bytes with_length(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  return out;
}

TEST(SafetensorsFormat, WriterBytesForOneF32TensorMatchHandBuilt) {
  // The checksum entry first (every file mixprec writes has one), then the tensor; padded
  // with spaces so the data starts 8-byte aligned.
  const std::string header = R"({"__metadata__":{"mixprec.checksums":")" + checksum_entry_for_w({}) +
                             R"("},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  Bytes expected = with_length(header);
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000, little-endian.
  for (uint8_t b : {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}) expected.push_back(b);

  auto bytes = serialize_safetensors({{"w", Tensor::from_vector({1.0f, -2.0f}, {2})}});
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  EXPECT_EQ(bytes.value(), expected);

  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  ASSERT_TRUE(save_safetensors(path, {{"w", Tensor::from_vector({1.0f, -2.0f}, {2})}}).is_ok());
  EXPECT_EQ(read_bytes(path), expected);
}

TEST(SafetensorsFormat, MetadataComesFirstInHeader) {
  const std::string header = R"({"__metadata__":{"k":"v","mixprec.checksums":")" + checksum_entry_for_w({{"k", "v"}}) +
                             R"("},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  Bytes expected = with_length(header);
  for (uint8_t b : {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}) expected.push_back(b);
  auto bytes =
      serialize_safetensors({{"w", Tensor::from_vector({1.0f, -2.0f}, {2})}}, {{"k", "v"}});
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  EXPECT_EQ(bytes.value(), expected);
}

TEST(SafetensorsFormat, ReadsForeignLayoutUnpaddedUnsortedWithWhitespace) {
  // Another writer's choices: no padding, keys in any order, whitespace around the JSON,
  // data not in name order. i64 -1 and 7, then u8 bytes 1 2 3.
  const std::string header =
      "\n { \"b\": {\"shape\": [3], \"data_offsets\": [16, 19], \"dtype\": \"U8\"},"
      " \"a\": {\"data_offsets\": [0, 16], \"dtype\": \"I64\", \"shape\": [2, 1]}} \t";
  Bytes data = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3};
  TempDir dir;
  const std::string path = dir.file("foreign.safetensors");
  write_bytes(path, make_file(header, data));
  auto loaded = load_safetensors(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_EQ(loaded->tensors.size(), 2u);
  EXPECT_EQ(loaded->tensors[0].first, "a");  // file (offset) order
  EXPECT_EQ(loaded->find("a")->shape(), (Shape{2, 1}));
  EXPECT_EQ(loaded->find("a")->data_ptr<int64_t>()[0], -1);
  EXPECT_EQ(loaded->find("a")->data_ptr<int64_t>()[1], 7);
  EXPECT_EQ(raw_bytes(*loaded->find("b")), (Bytes{1, 2, 3}));
}

// ------------------------------------------------------------------------- hostile input

// Writes bytes to a file named after the case and loads it: must be data_loss whose message
// names the file and contains `field`.
void expect_data_loss(const std::string& case_name, const Bytes& bytes, const std::string& field) {
  TempDir dir;
  const std::string path = dir.file("case_" + case_name + ".safetensors");
  write_bytes(path, bytes);
  auto loaded = load_safetensors(path);
  ASSERT_FALSE(loaded.is_ok()) << case_name << ": accepted";
  const Status& s = loaded.status();
  EXPECT_EQ(s.code(), StatusCode::data_loss) << case_name << ": " << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos) << case_name << ": " << s.message();
  EXPECT_NE(s.message().find(field), std::string::npos)
      << case_name << ": expected '" << field << "' in: " << s.message();
  // The in-memory parser applies the same rules.
  auto parsed = parse_safetensors(bytes.data(), bytes.size(), "mem");
  EXPECT_EQ(parsed.status().code(), StatusCode::data_loss) << case_name;
}

// One F32 [2] tensor "w" with a custom entry body.
std::string one_entry(const std::string& body) { return "{\"w\":" + body + "}"; }
const Bytes k8Bytes = {1, 2, 3, 4, 5, 6, 7, 8};

TEST(SafetensorsCorrupt, FileShorterThanLengthField) {
  for (size_t n = 0; n < 8; ++n)
    expect_data_loss("short" + std::to_string(n), Bytes(n, 0), "at least 8");
}

TEST(SafetensorsCorrupt, HeaderLengthTooLargeOrPastEnd) {
  const std::string h = one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})");
  expect_data_loss("len_over_limit", make_file(h, k8Bytes, 100'000'001), "header length");
  expect_data_loss("len_max_u64", make_file(h, k8Bytes, ~uint64_t{1}), "header length");  // 2^64-2
  expect_data_loss("len_past_end", make_file(h, k8Bytes, h.size() + 9), "header length");
  // Exactly at the limit but the file is small: still refused without allocating 100 MB.
  expect_data_loss("len_at_limit", make_file(h, k8Bytes, 100'000'000), "header length");
}

TEST(SafetensorsCorrupt, HeaderNotJsonOrNotObject) {
  expect_data_loss("not_json", make_file("{not json"), "not valid JSON");
  expect_data_loss("trailing_garbage", make_file("{} x"), "not valid JSON");
  expect_data_loss("bad_utf8", make_file("{\"\xff\xfe\": 1}"), "not valid JSON");
  expect_data_loss("nul_byte", make_file(std::string("{}\0", 3)), "not valid JSON");
  expect_data_loss("nul_then_more", make_file(std::string("{}\0{\"a\":1}", 10)), "NUL byte");
  expect_data_loss("huge_number", make_file(R"({"w": 1e400})"), "not valid JSON");
  expect_data_loss("array", make_file("[1, 2]"), "expected a JSON object");
  expect_data_loss("string", make_file("\"hi\""), "expected a JSON object");
  expect_data_loss("empty_header", make_file(""), "not valid JSON");
  // Deep nesting must not overflow the stack while parsing, reporting or freeing.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expect_data_loss("deep_array", make_file(deep), "expected a JSON object");
  expect_data_loss(
      "deep_shape",
      make_file(one_entry("{\"dtype\":\"F32\",\"shape\":" + deep + ",\"data_offsets\":[0,0]}")),
      "shape");
}

TEST(SafetensorsCorrupt, EntryMissingFields) {
  expect_data_loss("no_dtype",
                   make_file(one_entry(R"({"shape":[2],"data_offsets":[0,8]})"), k8Bytes),
                   "field 'dtype'");
  expect_data_loss("no_shape",
                   make_file(one_entry(R"({"dtype":"F32","data_offsets":[0,8]})"), k8Bytes),
                   "field 'shape'");
  expect_data_loss("no_offsets", make_file(one_entry(R"({"dtype":"F32","shape":[2]})"), k8Bytes),
                   "field 'data_offsets'");
  expect_data_loss("not_object", make_file(one_entry("[1]"), k8Bytes), "tensor 'w'");
}

TEST(SafetensorsCorrupt, EntryFieldsOfWrongType) {
  struct Case {
    const char* name;
    const char* body;
    const char* field;
  };
  const Case cases[] = {
      {"dtype_number", R"({"dtype":5,"shape":[2],"data_offsets":[0,8]})", "field 'dtype'"},
      {"shape_string", R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", "field 'shape'"},
      {"shape_float", R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", "field 'shape'"},
      {"shape_negative", R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", "field 'shape'"},
      {"shape_null", R"({"dtype":"F32","shape":[null],"data_offsets":[0,8]})", "field 'shape'"},
      {"offsets_short", R"({"dtype":"F32","shape":[2],"data_offsets":[0]})",
       "field 'data_offsets'"},
      {"offsets_long", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,8]})",
       "field 'data_offsets'"},
      {"offsets_object", R"({"dtype":"F32","shape":[2],"data_offsets":{}})",
       "field 'data_offsets'"},
      {"offsets_negative", R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})",
       "field 'data_offsets'"},
      {"offsets_float", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.5]})",
       "field 'data_offsets'"},
  };
  for (const Case& c : cases)
    expect_data_loss(c.name, make_file(one_entry(c.body), k8Bytes), c.field);
}

TEST(SafetensorsCorrupt, UnknownDtype) {
  for (const char* dt : {"BOOL", "f32", "F8_E4M3", ""}) {
    const std::string body =
        std::string(R"({"dtype":")") + dt + R"(","shape":[2],"data_offsets":[0,8]})";
    expect_data_loss(std::string("dtype_") + dt, make_file(one_entry(body), k8Bytes),
                     "field 'dtype'");
  }
}

TEST(SafetensorsCorrupt, HugeNamesAreShortenedInMessages) {
  const std::string name(1 << 20, 'n');
  const std::string h = "{\"" + name + R"(":{"dtype":"BOOL","shape":[2],"data_offsets":[0,8]}})";
  const Bytes bytes = make_file(h, k8Bytes);
  auto parsed = parse_safetensors(bytes.data(), bytes.size(), "huge_name");
  EXPECT_EQ(parsed.status().code(), StatusCode::data_loss);
  EXPECT_LT(parsed.status().message().size(), 400u) << parsed.status().message().substr(0, 400);
  EXPECT_NE(parsed.status().message().find("field 'dtype'"), std::string::npos);
}

TEST(SafetensorsCorrupt, ShapeProductOverflow) {
  // The Rust library's test_validation_overflow shapes, plus a byte-count-only overflow.
  expect_data_loss(
      "numel_overflow_u64",
      make_file(
          one_entry(R"({"dtype":"F32","shape":[2,18446744073709551614],"data_offsets":[0,8]})"),
          k8Bytes),
      "field 'shape'");
  expect_data_loss(
      "numel_overflow_i64",
      make_file(
          one_entry(R"({"dtype":"F32","shape":[2,9223372036854775807],"data_offsets":[0,8]})"),
          k8Bytes),
      "field 'shape'");
  expect_data_loss(
      "bytes_overflow",
      make_file(
          one_entry(R"({"dtype":"F64","shape":[2305843009213693952,2],"data_offsets":[0,8]})"),
          k8Bytes),
      "field 'shape'");
  std::string dims = "[1";
  for (int i = 0; i < 64; ++i) dims += ",1";
  expect_data_loss(
      "too_many_dims",
      make_file(one_entry(R"({"dtype":"F32","shape":)" + dims + R"(],"data_offsets":[0,4]})"),
                k8Bytes),
      "field 'shape'");
}

TEST(SafetensorsCorrupt, OffsetsInconsistentWithShape) {
  expect_data_loss(
      "end_before_begin",
      make_file(one_entry(R"({"dtype":"F32","shape":[0],"data_offsets":[8,4]})"), k8Bytes),
      "field 'data_offsets'");
  expect_data_loss(
      "byte_count",
      make_file(one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"), k8Bytes),
      "field 'data_offsets'");
  expect_data_loss(
      "byte_count_dtype",
      make_file(one_entry(R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})"), k8Bytes),
      "field 'data_offsets'");
}

TEST(SafetensorsCorrupt, OffsetsOutOfOrderGapsAndOverlaps) {
  const Bytes data16(16, 0);
  expect_data_loss(
      "not_from_zero",
      make_file(one_entry(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), k8Bytes),
      "field 'data_offsets'");
  expect_data_loss("gap",
                   make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             data16),
                   "gap");
  expect_data_loss("overlap",
                   make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             data16),
                   "overlap");
  // test_json_attack: ten tensors all claiming [0, 16].
  std::string attack = "{";
  for (int i = 0; i < 10; ++i)
    attack += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
              R"(":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})";
  attack += "}";
  expect_data_loss("json_attack", make_file(attack, data16), "overlap");
  expect_data_loss("duplicate_name",
                   make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             data16),
                   "tensor 'a'");
}

TEST(SafetensorsCorrupt, BufferNotCoveredExactly) {
  const std::string h = one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})");
  Bytes longer = k8Bytes;
  longer.insert(longer.end(), {'p', 'o', 'l', 'y'});  // polyglot trailing data
  expect_data_loss("trailing", make_file(h, longer), "file size");
  expect_data_loss("truncated_data", make_file(h, Bytes(6, 0)), "field 'data_offsets'");
  expect_data_loss("no_data", make_file(h), "field 'data_offsets'");
  expect_data_loss("empty_with_data", make_file("{}", Bytes(3, 0)), "file size");
}

TEST(SafetensorsCorrupt, MetadataNotStringMap) {
  expect_data_loss("meta_array", make_file(R"({"__metadata__":[]})"), "field '__metadata__'");
  expect_data_loss("meta_number_value", make_file(R"({"__metadata__":{"k":1}})"),
                   "field '__metadata__'");
  expect_data_loss("meta_nested", make_file(R"({"__metadata__":{"k":{"x":"y"}}})"),
                   "field '__metadata__'");
}

// A small valid file cut at every length: each prefix must be refused cleanly.
TEST(SafetensorsCorrupt, TruncationAtEveryByteIsRejected) {
  auto full = serialize_safetensors(
      {{"a", Tensor::from_vector({1, 2, 3}, {3})}, {"b", Tensor::from_vector_i64({5, -6}, {2})}},
      {{"step", "3"}});
  ASSERT_TRUE(full.is_ok());
  const Bytes& bytes = full.value();
  ASSERT_TRUE(parse_safetensors(bytes.data(), bytes.size(), "full").is_ok());
  TempDir dir;
  const std::string path = dir.file("cut.safetensors");
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Bytes prefix(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    write_bytes(path, prefix);
    auto loaded = load_safetensors(path);
    ASSERT_EQ(loaded.status().code(), StatusCode::data_loss) << "cut at " << n;
    ASSERT_NE(loaded.status().message().find(path), std::string::npos) << loaded.status().message();
    // Exactly-sized heap copy so that ASan would catch a read past the end.
    std::unique_ptr<uint8_t[]> heap(new uint8_t[n + 1]);
    if (n > 0) std::memcpy(heap.get(), prefix.data(), n);
    ASSERT_EQ(parse_safetensors(heap.get(), n, "mem").status().code(), StatusCode::data_loss)
        << "cut at " << n;
  }
}

// Every byte replaced by a few troublesome values: parse returns ok or data_loss, never
// crashes or throws (a tiny deterministic fuzz of the whole parse path).
TEST(SafetensorsCorrupt, SingleByteMutationsNeverCrash) {
  auto full = serialize_safetensors(
      {{"a", Tensor::from_vector({1, 2, 3}, {3})}, {"b", Tensor::from_vector_i64({5, -6}, {2})}},
      {{"step", "3"}});
  ASSERT_TRUE(full.is_ok());
  int rejected = 0;
  for (size_t i = 0; i < full->size(); ++i) {
    for (uint8_t v : std::initializer_list<uint8_t>{0x00, 0xff, 0x7f, uint8_t('['), uint8_t('"'),
                                                    uint8_t('9'), uint8_t('-')}) {
      Bytes b = full.value();
      b[i] = v;
      StatusOr<SafetensorsFile> r = parse_safetensors(b.data(), b.size(), "mutant");
      ASSERT_TRUE(r.is_ok() || r.status().code() == StatusCode::data_loss)
          << "byte " << i << " = " << int(v) << ": " << r.status().message();
      rejected += !r.is_ok();
    }
  }
  EXPECT_GT(rejected, 0);
}

// ------------------------------------------------------------------------- files and atomicity

TEST(SafetensorsIo, MissingFileIsNotFoundAndDirectoryIsDataLoss) {
  TempDir dir;
  auto missing = load_safetensors(dir.file("nope.safetensors"));
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find("nope.safetensors"), std::string::npos);
  // Not a regular file: the input is wrong (exit code 4 for a checkpoint), not the OS.
  auto is_dir = load_safetensors(dir.path());
  EXPECT_EQ(is_dir.status().code(), StatusCode::data_loss);
  EXPECT_NE(is_dir.status().message().find("it is a directory, not a regular file"), std::string::npos)
      << is_dir.status().message();
}

class SafetensorsAtomic : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("ckpt.safetensors");
    ASSERT_TRUE(save_safetensors(path_, {{"old", Tensor::from_vector({7, 8}, {2})}}).is_ok());
    old_bytes_ = read_bytes(path_);
  }
  void expect_old_file_intact() {
    EXPECT_EQ(read_bytes(path_), old_bytes_);
    auto loaded = load_safetensors(path_);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
    ASSERT_NE(loaded->find("old"), nullptr);
    EXPECT_TRUE(dir_.temp_files().empty()) << dir_.temp_files().front();
  }
  Tensor big() { return Tensor::zeros({64 * 1024}); }  // 256 KiB
  TempDir dir_;
  std::string path_;
  Bytes old_bytes_;
};

TEST_F(SafetensorsAtomic, SaveReplacesTheFileAndLeavesNoTemp) {
  ASSERT_TRUE(save_safetensors(path_, {{"new", Tensor::from_vector({1}, {1})}}).is_ok());
  auto loaded = load_safetensors(path_);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_EQ(loaded->find("old"), nullptr);
  EXPECT_NE(loaded->find("new"), nullptr);
  EXPECT_TRUE(dir_.temp_files().empty());
}

// A write that fails halfway (the file-size limit makes write() return EFBIG) leaves the old
// file as it was and removes the partial temp file.
TEST_F(SafetensorsAtomic, FailingWriteLeavesOldFileIntact) {
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status s = save_safetensors(path_, {{"big", big()}});
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);

  EXPECT_EQ(s.code(), StatusCode::io_error) << s.message();
  EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::strerror(EFBIG)), std::string::npos) << s.message();
  expect_old_file_intact();
}

TEST_F(SafetensorsAtomic, MissingDirectoryIsIoErrorNamingPath) {
  const std::string path = dir_.file("no/such/dir/x.safetensors");
  const Status s = save_safetensors(path, {{"t", big()}});
  EXPECT_EQ(s.code(), StatusCode::io_error);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::strerror(ENOENT)), std::string::npos) << s.message();
  expect_old_file_intact();
}

// The rename step fails (the target is a non-empty directory): the target and the old file
// survive and the fully written temp file is removed.
TEST_F(SafetensorsAtomic, FailingRenameRemovesTemp) {
  const std::string target = dir_.file("occupied");
  fs::create_directories(target + "/child");
  const Status s = save_safetensors(target, {{"t", big()}});
  EXPECT_EQ(s.code(), StatusCode::io_error);
  EXPECT_NE(s.message().find(target), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_directory(target + "/child"));
  expect_old_file_intact();
}

TEST_F(SafetensorsAtomic, ReadOnlyDirectoryLeavesOldFileIntact) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  fs::permissions(dir_.path(),
                  fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  const Status s = save_safetensors(path_, {{"t", big()}});
  fs::permissions(dir_.path(), fs::perms::owner_write, fs::perm_options::add);
  EXPECT_EQ(s.code(), StatusCode::io_error);
  EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  expect_old_file_intact();
}

TEST_F(SafetensorsAtomic, InvalidArgumentsTouchNothing) {
  Tensor t = Tensor::from_vector({1}, {1});
  EXPECT_EQ(save_safetensors(path_, {{"x", t}, {"x", t}}).code(), StatusCode::invalid_argument);
  expect_old_file_intact();
}

}  // namespace
}  // namespace mixprec
