// convert_test.cpp: bulk dtype conversion. The vector kernels are checked against the scalar
// Half/BFloat16 rules (themselves checked by brute force in half_test.cpp); the other rules
// against hand-worked values. Fallback paths: the binary re-runs its ConvertBulk* tests with
// MIXPREC_CPU_DISABLE so the F16C and pure-scalar kernels get the same checks.
#include <gtest/gtest.h>
#include <immintrin.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "mixprec/core/half.h"

namespace mixprec {
namespace {

constexpr int64_t kLengths[] = {0, 1, 15, 16, 17, 31, 32, 33, 1000003};

float float_of(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// Special values first (so short lengths and the first vectors see them), then random bit
// patterns (any class, ~1/256 are f32 subnormals) and random values in the f16 range.
std::vector<float> test_floats(size_t n) {
  const uint32_t specials[] = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
      0xff800001, 0x7fa5a5a5, 0x7fffffff, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff,
      0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x477fe000, 0x477fefff,
      0x477ff000, 0xc77ff000, 0x33000000, 0x33000001, 0x33400000, 0x387fc000, 0x387fe000,
      0x38800000, 0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x3f808001, 0x00018000};
  std::vector<float> v;
  for (uint32_t s : specials) v.push_back(float_of(s));
  std::mt19937 rng(77);
  std::uniform_int_distribution<uint32_t> f16_range(0x32800000u, 0x47900000u);
  while (v.size() < n) {
    v.push_back(float_of(v.size() % 2 ? static_cast<uint32_t>(rng()) : f16_range(rng) | (rng() & 0x80000000u)));
  }
  v.resize(n);
  return v;
}

TEST(ConvertBulkTest, F32ToF16MatchesScalarForEveryLength) {
  const std::vector<float> src = test_floats(1000003 + 1);
  std::vector<uint16_t> dst(src.size());
  for (int64_t n : kLengths) {
    for (int64_t offset : {0, 1}) {  // offset 1: unaligned start
      if (offset + n > static_cast<int64_t>(src.size())) continue;
      std::fill(dst.begin(), dst.end(), 0xdead);
      convert_elements(src.data() + offset, DType::f32, dst.data(), DType::f16, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(dst[i], Half(src[offset + i]).bits)
            << "n=" << n << " i=" << i << " f32 bits " << std::hex << bits_of(src[offset + i]);
      }
      ASSERT_EQ(dst[n], 0xdead) << "wrote past the end, n=" << n;
    }
  }
}

TEST(ConvertBulkTest, F32ToBF16MatchesScalarForEveryLength) {
  std::vector<float> src = test_floats(1000003 + 1);
  // One subnormal-free stretch so the pure hardware branch runs too.
  for (int i = 40; i < 200; ++i) src[i] = 1.0f + static_cast<float>(i) * 0x1p-12f;
  std::vector<uint16_t> dst(src.size());
  for (int64_t n : kLengths) {
    for (int64_t offset : {0, 1}) {
      if (offset + n > static_cast<int64_t>(src.size())) continue;
      std::fill(dst.begin(), dst.end(), 0xdead);
      convert_elements(src.data() + offset, DType::f32, dst.data(), DType::bf16, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(dst[i], BFloat16(src[offset + i]).bits)
            << "n=" << n << " i=" << i << " f32 bits " << std::hex << bits_of(src[offset + i]);
      }
      ASSERT_EQ(dst[n], 0xdead) << "wrote past the end, n=" << n;
    }
  }
}

TEST(ConvertBulkTest, SubnormalF32ToBF16IsRoundedNotFlushed) {
  // 0x007fffff rounds up to FLT_MIN (0x0080); VCVTNEPS2BF16 alone would give 0.
  std::vector<float> src(64, 1.0f);
  src[5] = float_of(0x007fffff);
  src[40] = float_of(0x80010001);
  std::vector<uint16_t> dst(64);
  convert_elements(src.data(), DType::f32, dst.data(), DType::bf16, 64);
  EXPECT_EQ(dst[5], 0x0080);
  EXPECT_EQ(dst[40], 0x8001);
  EXPECT_EQ(dst[0], 0x3f80);
}

// Widening: all 65536 patterns, with the pattern list rotated so every pattern also sits in
// a vector tail once.
template <typename T>
void check_widening_all_patterns(DType dtype) {
  std::vector<uint16_t> src(65536 + 17);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u);  // odd: a permutation
  std::vector<float> dst(src.size());
  for (int64_t n : {int64_t{65536}, int64_t{65536 + 17}, int64_t{15}}) {
    convert_elements(src.data(), dtype, dst.data(), DType::f32, n);
    for (int64_t i = 0; i < n; ++i) {
      const float expected = static_cast<float>(T::from_bits(src[i]));
      ASSERT_EQ(bits_of(dst[i]), bits_of(expected)) << "pattern " << std::hex << src[i];
    }
  }
}

TEST(ConvertBulkTest, F16ToF32AllPatternsMatchScalar) { check_widening_all_patterns<Half>(DType::f16); }
TEST(ConvertBulkTest, BF16ToF32AllPatternsMatchScalar) { check_widening_all_patterns<BFloat16>(DType::bf16); }

TEST(ConvertBulkTest, IgnoresMxcsrFlushModes) {
  // Other code (or a user) may turn on FTZ/DAZ; conversions must not change with it.
  const std::vector<float> src = test_floats(4096);
  std::vector<uint16_t> h(src.size()), b(src.size());
  std::vector<uint16_t> patterns(65536);
  for (uint32_t i = 0; i < 65536; ++i) patterns[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(65536);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
  convert_elements(src.data(), DType::f32, h.data(), DType::f16, static_cast<int64_t>(src.size()));
  convert_elements(src.data(), DType::f32, b.data(), DType::bf16, static_cast<int64_t>(src.size()));
  convert_elements(patterns.data(), DType::f16, wide.data(), DType::f32, 65536);
  _mm_setcsr(saved);
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(h[i], Half(src[i]).bits) << std::hex << bits_of(src[i]);
    ASSERT_EQ(b[i], BFloat16(src[i]).bits) << std::hex << bits_of(src[i]);
  }
  for (uint32_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(bits_of(wide[i]), bits_of(static_cast<float>(Half::from_bits(static_cast<uint16_t>(i)))));
  }
}

TEST(ConvertBulkTest, CpuFeaturesHonourDisableList) {
  const char* env = std::getenv("MIXPREC_CPU_DISABLE");
  const std::string disabled = env ? env : "";
  if (disabled.find("avx512f") != std::string::npos) {
    EXPECT_FALSE(cpu_features().avx512f);
    EXPECT_FALSE(cpu_features().avx512_bf16);  // needs avx512f
  }
  if (disabled.find("f16c") != std::string::npos) EXPECT_FALSE(cpu_features().f16c);
}

// ---- Non-vector rules, against hand-worked values -------------------------------------

template <typename Dst, typename Src>
std::vector<Dst> convert(const std::vector<Src>& src, DType from, DType to) {
  std::vector<Dst> dst(src.size());
  convert_elements(src.data(), from, dst.data(), to, static_cast<int64_t>(src.size()));
  return dst;
}

TEST(ConvertTest, FloatToIntegerTruncatesAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> src = {2.7f, -2.7f, -0.5f, 0.0f, 1e19f, -1e19f, nan, inf, -inf, 0x1p62f, 16777216.0f, -0x1p63f};
  const std::vector<int64_t> expected = {2, -2, 0, 0, INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN,
                                         int64_t{1} << 62, 16777216, INT64_MIN};
  EXPECT_EQ((convert<int64_t>(src, DType::f32, DType::i64)), expected);
  const std::vector<int32_t> expected32 = {2, -2, 0, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN,
                                           INT32_MAX, 16777216, INT32_MIN};
  EXPECT_EQ((convert<int32_t>(src, DType::f32, DType::i32)), expected32);
  const std::vector<uint8_t> expected8 = {2, 0, 0, 0, 255, 0, 0, 255, 0, 255, 255, 0};
  EXPECT_EQ((convert<uint8_t>(src, DType::f32, DType::u8)), expected8);
  const std::vector<double> d = {255.99, 256.0, -0.99, 2147483647.9, -2147483648.9};
  EXPECT_EQ((convert<int32_t>(d, DType::f64, DType::i32)),
            (std::vector<int32_t>{255, 256, 0, INT32_MAX, INT32_MIN}));
  EXPECT_EQ((convert<uint8_t>(d, DType::f64, DType::u8)), (std::vector<uint8_t>{255, 255, 0, 255, 0}));
  // f16/bf16 sources go through their float value: f16 0x4d1a = 20.40625, bf16 0xc2a3 = -81.5.
  EXPECT_EQ((convert<int64_t>(std::vector<uint16_t>{0x4d1a}, DType::f16, DType::i64)), std::vector<int64_t>{20});
  EXPECT_EQ((convert<int64_t>(std::vector<uint16_t>{0xc2a3}, DType::bf16, DType::i64)), std::vector<int64_t>{-81});
}

TEST(ConvertTest, IntegerToIntegerWraps) {
  const std::vector<int64_t> src = {(int64_t{1} << 32) + 5, -1, 300, INT64_MIN};
  EXPECT_EQ((convert<int32_t>(src, DType::i64, DType::i32)), (std::vector<int32_t>{5, -1, 300, 0}));
  EXPECT_EQ((convert<uint8_t>(src, DType::i64, DType::u8)), (std::vector<uint8_t>{5, 255, 44, 0}));
  EXPECT_EQ((convert<int64_t>(std::vector<uint8_t>{0, 200, 255}, DType::u8, DType::i64)),
            (std::vector<int64_t>{0, 200, 255}));
}

TEST(ConvertTest, U8ToFloatIsExactForAllValues) {
  std::vector<uint8_t> src(256);
  for (int i = 0; i < 256; ++i) src[i] = static_cast<uint8_t>(i);
  const auto f = convert<float>(src, DType::u8, DType::f32);
  const auto h = convert<uint16_t>(src, DType::u8, DType::f16);
  const auto b = convert<uint16_t>(src, DType::u8, DType::bf16);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(f[i], static_cast<float>(i));
    EXPECT_EQ(static_cast<float>(Half::from_bits(h[i])), static_cast<float>(i));  // f16: 11 bits, exact
    EXPECT_EQ(static_cast<float>(BFloat16::from_bits(b[i])), static_cast<float>(i));  // 255 = 0x437f
  }
}

TEST(ConvertTest, IntegersToFloatRoundToNearestEvenOnce) {
  const std::vector<int64_t> src = {16777217, 16777219, 65519, 65520, -65536,
                                    (int64_t{1} << 62) + (int64_t{1} << 54) + 1,  // just above a bf16 tie
                                    (int64_t{1} << 62) + (int64_t{1} << 54)};     // exactly the tie
  EXPECT_EQ((convert<float>(src, DType::i64, DType::f32)),
            (std::vector<float>{16777216.0f, 16777220.0f, 65519.0f, 65520.0f, -65536.0f, 0x1p62f + 0x1p54f, 0x1p62f + 0x1p54f}));
  // f16: 65519 -> 65504 (0x7bff); 65520 and beyond -> inf.
  const auto h = convert<uint16_t>(src, DType::i64, DType::f16);
  EXPECT_EQ(h[0], 0x7c00); EXPECT_EQ(h[2], 0x7bff); EXPECT_EQ(h[3], 0x7c00); EXPECT_EQ(h[4], 0xfc00);
  // bf16 near 2^62 has a step of 2^55: the value just above the tie must round up (0x5e81),
  // which converting through double or float first (both round to the tie) would miss.
  const auto b = convert<uint16_t>(src, DType::i64, DType::bf16);
  EXPECT_EQ(b[5], 0x5e81);
  EXPECT_EQ(b[6], 0x5e80);
  const auto b32 = convert<uint16_t>(std::vector<int32_t>{(1 << 30) + (1 << 22) + 1, -257}, DType::i32, DType::bf16);
  EXPECT_EQ(b32[0], 0x4e81);  // 2^30 step 2^23: just above the tie rounds up
  EXPECT_EQ(b32[1], 0xc380);  // -257: tie between 256 and 258, even is 256
}

TEST(ConvertTest, F64ToHalfRoundsOnce) {
  const std::vector<double> src = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11, 1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-8,
                                   65519.999, 65520.0, 1e300, -1e300, 1e-300, -1e-300,
                                   std::numeric_limits<double>::quiet_NaN(), 0x1p-24 * 0.75, 1e-40};
  const auto h = convert<uint16_t>(src, DType::f64, DType::f16);
  const std::vector<uint16_t> expected_h = {0x3c01, 0x3c00, 0x3c04, 0x3c04, 0x7bff, 0x7c00, 0x7c00,
                                            0xfc00, 0x0000, 0x8000, 0x7e00, 0x0001, 0x0000};
  EXPECT_EQ(h, expected_h);
  const auto b = convert<uint16_t>(src, DType::f64, DType::bf16);
  // 1e-40 is in the bf16 subnormal range: 1e-40 / 2^-133 = 1.089 -> 1 = 0x0001.
  const std::vector<uint16_t> expected_b = {0x3f80, 0x3f80, 0x3f81, 0x3f80, 0x4780, 0x4780, 0x7f80,
                                            0xff80, 0x0000, 0x8000, 0x7fc0, 0x3340, 0x0001};
  EXPECT_EQ(b, expected_b);
}

// The vector f64 <-> f16/bf16 kernels (round-to-odd to f32 in 8-lane blocks, then the f32
// kernels) against the same conversion one element at a time (the scalar rules), on values
// placed so that every kind lands in vector lanes of both stages: ties and near-ties of both
// 16-bit formats, f32 and 16-bit subnormals, overflow, inf, NaN, and random magnitudes.
TEST(ConvertTest, F64HalfVectorKernelsGiveTheScalarBits) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-150, 130);
  const double specials[] = {1.0 + 0x1p-8, 1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-11, 1.0 + 0x1p-11 - 0x1p-45,
                             65520.0, 65519.999, 3.5e38, 1e300, -1e300, 1e-40, 1e-45, 0x1p-149 * 0.5,
                             std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(), -0.0, 0.0, 0x1p-24 * 0.75};
  std::vector<double> src(4099);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = i % 5 == 0 ? specials[(i / 5) % std::size(specials)]
                        : (rng() & 1 ? -1 : 1) * std::ldexp(mant(rng), expo(rng));
  for (DType half : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(half));
    const auto all = convert<uint16_t>(src, DType::f64, half);
    std::vector<double> widened_all = convert<double>(all, half, DType::f64);
    for (size_t i = 0; i < src.size(); ++i) {
      const auto one = convert<uint16_t>(std::vector<double>{src[i]}, DType::f64, half);
      ASSERT_EQ(all[i], one[0]) << "element " << i << " = " << src[i];
      const auto back = convert<double>(one, half, DType::f64);
      ASSERT_TRUE(std::bit_cast<uint64_t>(widened_all[i]) == std::bit_cast<uint64_t>(back[0])) << i;
    }
  }
}

TEST(ConvertTest, F64RoundTripsAreExact) {
  std::mt19937 rng(9);
  std::vector<float> f(10007);
  for (auto& x : f) do { x = float_of(static_cast<uint32_t>(rng())); } while (std::isnan(x));
  const auto back = convert<float>(convert<double>(f, DType::f32, DType::f64), DType::f64, DType::f32);
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(bits_of(back[i]), bits_of(f[i]));

  for (DType half : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> p(65536);
    for (uint32_t i = 0; i < 65536; ++i) p[i] = static_cast<uint16_t>(i);
    const auto d = convert<double>(p, half, DType::f64);
    const auto q = convert<uint16_t>(d, DType::f64, half);
    for (uint32_t i = 0; i < 65536; ++i) {
      if (std::isnan(d[i])) {  // NaN stays NaN (quieted)
        ASSERT_EQ(q[i], p[i] | (half == DType::f16 ? 0x200 : 0x40));
      } else {
        ASSERT_EQ(q[i], p[i]) << dtype_name(half) << " pattern " << std::hex << i;
      }
    }
  }

  const std::vector<int64_t> ints = {0, -1, 1, (int64_t{1} << 53), -(int64_t{1} << 53), 123456789012345};
  EXPECT_EQ((convert<int64_t>(convert<double>(ints, DType::i64, DType::f64), DType::f64, DType::i64)), ints);
  const std::vector<int32_t> i32 = {INT32_MIN, INT32_MAX, -7, 0};
  EXPECT_EQ((convert<int32_t>(convert<double>(i32, DType::i32, DType::f64), DType::f64, DType::i32)), i32);
}

// Every pair, on values every dtype holds exactly, long enough for the threaded path.
TEST(ConvertTest, EveryPairPreservesSharedValues) {
  const double values[] = {0, 1, 2, 7, 100, 255};
  constexpr int64_t n = 200003;
  for (DType from : kAllDTypes) {
    std::vector<unsigned char> src(n * dtype_size(from));
    for (int64_t i = 0; i < n; ++i) store_from_double(src.data(), from, i, values[i % 6]);
    for (DType to : kAllDTypes) {
      std::vector<unsigned char> dst(n * dtype_size(to));
      convert_elements(src.data(), from, dst.data(), to, n);
      for (int64_t i = 0; i < n; i += 997) {
        ASSERT_EQ(load_as_double(dst.data(), to, i), values[i % 6])
            << dtype_name(from) << " -> " << dtype_name(to) << " at " << i;
      }
      ASSERT_EQ(load_as_double(dst.data(), to, n - 1), values[(n - 1) % 6]);
    }
  }
}

TEST(ConvertTest, LoadAndStoreDoubleUseTheRawLayout) {
  unsigned char buf[64] = {};
  const struct {
    DType dtype;
    double stored;
    uint64_t raw;  // expected little-endian bytes
    double loaded;
  } cases[] = {
      {DType::f32, 1.5, 0x3fc00000, 1.5},
      {DType::f32, 0.1, 0x3dcccccd, 0.100000001490116119384765625},
      {DType::f16, 1.5, 0x3e00, 1.5},
      {DType::f16, -65519.0, 0xfbff, -65504.0},
      {DType::bf16, 1.5, 0x3fc0, 1.5},
      {DType::bf16, 0.1, 0x3dcd, 0.10009765625},
      {DType::f64, 0.1, 0x3fb999999999999a, 0.1},
      {DType::i64, -2.9, 0xfffffffffffffffe, -2.0},
      {DType::i32, 3.99, 0x3, 3.0},
      {DType::u8, -2.5, 0x0, 0.0},
      {DType::u8, 254.7, 0xfe, 254.0},
  };
  for (const auto& c : cases) {
    const size_t size = dtype_size(c.dtype);
    std::memset(buf, 0xab, sizeof buf);
    store_from_double(buf, c.dtype, 3, c.stored);
    uint64_t raw = 0;
    std::memcpy(&raw, buf + 3 * size, size);
    EXPECT_EQ(raw, c.raw) << dtype_name(c.dtype) << " " << c.stored;
    EXPECT_EQ(buf[3 * size - 1], 0xab) << "neighbour clobbered";
    EXPECT_EQ(buf[4 * size], 0xab) << "neighbour clobbered";
    EXPECT_EQ(load_as_double(buf, c.dtype, 3), c.loaded) << dtype_name(c.dtype);
  }
}

// ---- CPU features --------------------------------------------------------------------

TEST(ConvertCpuFeaturesTest, AgreeWithProcCpuinfo) {
  if (std::getenv("MIXPREC_CPU_DISABLE") != nullptr) GTEST_SKIP() << "features disabled on purpose";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma, flags.count("fma") == 1);
  EXPECT_EQ(f.f16c, flags.count("f16c") == 1);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512_bf16, flags.count("avx512_bf16") == 1);
  EXPECT_EQ(f.avx512_fp16, flags.count("avx512_fp16") == 1);
  if (f.amx_bf16) EXPECT_EQ(flags.count("amx_bf16"), 1u);  // the flag alone: permission may be refused
  EXPECT_FALSE(cpu_features_string().empty());
  std::printf("cpu features: %s\n", cpu_features_string().c_str());
}

// Re-runs the bulk tests in a child process with vector features hidden, so the AVX2 and
// F16C kernels (what a machine without AVX-512 runs) and the pure scalar path are checked too.
TEST(ConvertTest, FallbackPathsGiveTheSameBits) {
  if (std::getenv("MIXPREC_CPU_DISABLE") != nullptr) GTEST_SKIP() << "already the child";
  char exe[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(len, 0);
  // AVX2 kernels (no AVX-512), then the F16C ones, then the pure scalar path.
  for (const char* disable : {"avx512f,avx512_bf16", "avx512f,avx512_bf16,avx2",
                              "avx512f,avx512_bf16,avx2,f16c"}) {
    const std::string cmd = std::string("MIXPREC_CPU_DISABLE=") + disable + " '" + exe +
                            "' --gtest_filter='ConvertBulkTest.*' > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "failed with MIXPREC_CPU_DISABLE=" << disable
                                           << " (re-run that command without > /dev/null)";
  }
}

}  // namespace
}  // namespace mixprec
