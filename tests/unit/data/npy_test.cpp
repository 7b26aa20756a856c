// npy_test.cpp: the .npy reader against files built byte by byte here (the format's spec:
// magic, version, little-endian header length, a dict literal padded to 64 bytes, raw data).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/data/npy.h"

namespace mixprec {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes npy(const std::string& dict, const Bytes& payload, int version = 1) {
  std::string header = dict;
  const size_t pre = version == 1 ? 10 : 12;
  header += std::string(63 - (pre + header.size()) % 64, ' ') + "\n";
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(version), 0};
  const uint32_t n = uint32_t(header.size());
  for (size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) b.push_back(uint8_t(n >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}
template <typename T>
Bytes le(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
StatusOr<NpyArray> parse(const Bytes& b) { return parse_npy(b.data(), b.size(), "t.npy"); }

TEST(Npy, ReadsEveryDtypeExactly) {
  auto u8 = parse(npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", {0, 1, 2, 253, 254, 255}));
  ASSERT_TRUE(u8.is_ok()) << u8.status().message();
  EXPECT_EQ(u8->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(u8->values, (std::vector<double>{0, 1, 2, 253, 254, 255}));
  auto i1 = parse(npy("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", {0x80, 0xff, 0x7f}));
  ASSERT_TRUE(i1.is_ok()) << i1.status().message();
  EXPECT_EQ(i1->values, (std::vector<double>{-128, -1, 127}));  // sign-extended
  auto i2 = parse(npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", le<int16_t>({-32768, 300})));
  ASSERT_TRUE(i2.is_ok());
  EXPECT_EQ(i2->values, (std::vector<double>{-32768, 300}));
  auto f4 = parse(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", le<float>({0.1f}), 2));
  ASSERT_TRUE(f4.is_ok()) << f4.status().message();
  EXPECT_TRUE(f4->shape.empty());
  EXPECT_EQ(f4->values, (std::vector<double>{double(0.1f)}));
  auto f8 = parse(npy("{'shape': (1, 2), 'descr': '<f8', 'fortran_order': False}", le<double>({-0.0, 1e300}), 3));
  ASSERT_TRUE(f8.is_ok()) << f8.status().message();  // keys in any order, no trailing comma
  EXPECT_EQ(f8->values[1], 1e300);
  auto empty = parse(npy("{'descr': '<u4', 'fortran_order': False, 'shape': (0, 5), }", {}));
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->values.empty());
}

void expect_refused(const Bytes& b, StatusCode code, const std::string& needle) {
  auto r = parse(b);
  ASSERT_FALSE(r.is_ok()) << "accepted; expected: " << needle;
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  EXPECT_NE(r.status().message().find("'t.npy'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(Npy, MalformedFilesAreDataLossNamingTheField) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  expect_refused(Bytes{'N', 'O', 'T'}, StatusCode::data_loss, "magic");
  Bytes v9 = npy(ok, le<float>({1, 2}));
  v9[6] = 9;
  expect_refused(v9, StatusCode::data_loss, "version 9.0");
  Bytes long_header = npy(ok, le<float>({1, 2}));
  long_header[8] = 0xff;
  long_header[9] = 0xff;
  expect_refused(long_header, StatusCode::data_loss, "runs past the end");
  expect_refused(npy(ok, le<float>({1})), StatusCode::data_loss, "need 8 bytes, the file holds 4 (truncated?)");
  expect_refused(npy(ok, le<float>({1, 2, 3})), StatusCode::data_loss, "(trailing bytes)");
  expect_refused(npy("{'descr': '<f4', 'shape': (2,), }", le<float>({1, 2})), StatusCode::data_loss,
                 "missing field 'fortran_order'");
  expect_refused(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", le<float>({1, 2})),
                 StatusCode::data_loss, "repeated key 'descr'");
  expect_refused(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", le<float>({1, 2})),
                 StatusCode::data_loss, "fortran_order");
  expect_refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", le<float>({1, 2})),
                 StatusCode::data_loss, "shape");
  expect_refused(npy("{'descr': '<u1', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", {}),
                 StatusCode::data_loss, "more than 2 GiB");
  expect_refused(npy("{'descr': '<u1', 'fortran_order': False, 'shape': (99999999999999999999,), }", {}),
                 StatusCode::data_loss, "shape");
}

TEST(Npy, ValidButUnsupportedFilesAreInvalidArgument) {
  expect_refused(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), }", le<float>({1, 2})),
                 StatusCode::invalid_argument, "Fortran order");
  expect_refused(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", Bytes(4)),
                 StatusCode::invalid_argument, "big-endian");
  expect_refused(npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", Bytes(8)),
                 StatusCode::invalid_argument, "dtype '|O' is not supported");
  expect_refused(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", Bytes(8)),
                 StatusCode::invalid_argument, "not supported");
}

}  // namespace
}  // namespace mixprec
