// half_test.cpp: the scalar Half / BFloat16 conversions against bit patterns worked out by
// hand, against the IEEE value formula, and against a brute-force nearest-value search.
#include "mixprec/core/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mixprec {
namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

// The value of an f16 pattern from the IEEE formula, in double (independent of half.h).
double half_value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f) return m ? std::nan("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

double bfloat16_value(uint16_t b) {
  const int sign = (b & 0x8000) ? -1 : 1;
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  if (e == 0xff) return m ? std::nan("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -133);
  return sign * std::ldexp(128 + m, e - 134);
}

// Brute-force round to nearest even: the non-negative patterns 0..max_finite are increasing
// in value, and inf sits where the next pattern would be (2^16 for f16, 2^128 for bf16).
uint16_t nearest_pattern(double x, uint16_t max_finite, double inf_position, double (*value)(uint16_t)) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  uint16_t lo = 0, hi = max_finite;  // largest pattern with value <= a
  if (a >= value(max_finite)) {
    lo = max_finite;
  } else {
    while (lo < hi) {
      const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
      if (value(mid) <= a) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
    }
  }
  const double below = value(lo);
  if (below == a) return sign | lo;
  const double above = lo == max_finite ? inf_position : value(static_cast<uint16_t>(lo + 1));
  const uint16_t up = static_cast<uint16_t>(lo + 1);  // max_finite + 1 is the inf pattern
  if (a - below < above - a) return sign | lo;
  if (a - below > above - a) return sign | up;
  return sign | ((lo & 1) ? up : lo);
}

uint16_t reference_half(float x) { return nearest_pattern(x, 0x7bff, 65536.0, half_value); }
uint16_t reference_bfloat16(float x) {
  return nearest_pattern(x, 0x7f7f, std::ldexp(1.0, 128), bfloat16_value);
}

TEST(HalfTest, EveryPatternWidensToItsValueAndNarrowsBack) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = static_cast<float>(Half::from_bits(h));
    const double expected = half_value(h);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // Quiet NaN, sign and payload kept: widen sets bit 22, narrowing keeps it.
      ASSERT_EQ(bits_of(f), ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13) | 0x400000u)
          << std::hex << h;
      ASSERT_EQ(Half(f).bits, h | 0x200) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(Half(f).bits, h) << std::hex << h;
  }
}

TEST(BFloat16Test, EveryPatternWidensToItsValueAndNarrowsBack) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float f = static_cast<float>(BFloat16::from_bits(b));
    ASSERT_EQ(bits_of(f), i << 16) << std::hex << b;  // widening is a plain shift
    const double expected = bfloat16_value(b);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_EQ(BFloat16(f).bits, b | 0x40) << std::hex << b;  // narrowing quiets
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << std::hex << b;
    ASSERT_EQ(BFloat16(f).bits, b) << std::hex << b;
  }
}

struct RoundCase {
  uint32_t f32_bits;
  uint16_t expected;
  const char* what;
};

TEST(HalfTest, HandWrittenRoundingCases) {
  const RoundCase cases[] = {
      {0x3f800000, 0x3c00, "1.0"},
      {0x3f801000, 0x3c00, "1 + 2^-11: tie, down to even"},
      {0x3f803000, 0x3c02, "1 + 3*2^-11: tie, up to even"},
      {0x3f800fff, 0x3c00, "just below the tie"},
      {0x3f801001, 0x3c01, "just above the tie"},
      {0x477fe000, 0x7bff, "65504, max finite"},
      {0x477fefff, 0x7bff, "65519.99 -> 65504"},
      {0x477ff000, 0x7c00, "65520 -> inf (tie, inf is even)"},
      {0x477fffff, 0x7c00, "65535.99 -> inf"},
      {0x47800000, 0x7c00, "65536 -> inf"},
      {0xc77ff000, 0xfc00, "-65520 -> -inf"},
      {0x33800000, 0x0001, "2^-24, smallest subnormal"},
      {0x33000000, 0x0000, "2^-25: tie to 0"},
      {0xb3000000, 0x8000, "-2^-25: tie to -0"},
      {0x33000001, 0x0001, "just above 2^-25"},
      {0x33400000, 0x0001, "0.75*2^-24 -> 2^-24"},
      {0x33c00000, 0x0002, "1.5*2^-24: tie, up to even 2"},
      {0x34200000, 0x0002, "2.5*2^-24: tie, down to even 2"},
      {0x387fc000, 0x03ff, "largest subnormal 1023*2^-24"},
      {0x387fe000, 0x0400, "1023.5*2^-24: tie, up to min normal"},
      {0x38800000, 0x0400, "2^-14, smallest normal"},
      {0x00000001, 0x0000, "f32 denormal -> +0"},
      {0x80000001, 0x8000, "-f32 denormal -> -0"},
      {0x7f800000, 0x7c00, "+inf"},
      {0xff800000, 0xfc00, "-inf"},
      {0x00000000, 0x0000, "+0"},
      {0x80000000, 0x8000, "-0"},
      {0x7fc00000, 0x7e00, "default quiet NaN"},
      {0xffc00000, 0xfe00, "negative quiet NaN"},
      {0x7f802000, 0x7e01, "signalling NaN with payload: quieted, payload kept"},
      {0x7fa5a5a5, 0x7f2d, "NaN, top payload bits kept"},
      {0x7f800001, 0x7e00, "NaN whose payload is below f16 precision stays NaN"},
      {0x40490fdb, 0x4248, "pi"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Half(float_of(c.f32_bits)).bits, c.expected) << c.what;
  }
}

TEST(BFloat16Test, HandWrittenRoundingCases) {
  const RoundCase cases[] = {
      {0x3f808000, 0x3f80, "1 + 2^-8: tie, down to even"},
      {0x3f818000, 0x3f82, "1 + 3*2^-8: tie, up to even"},
      {0x3f807fff, 0x3f80, "just below the tie"},
      {0x3f808001, 0x3f81, "just above the tie"},
      {0x7f61b1e6, 0x7f62, "3.0e38 -> 0x7f62 (3.0041e38)"},
      {0x7f7f0000, 0x7f7f, "largest bf16 3.3895e38"},
      {0x7f7f7fff, 0x7f7f, "just below the overflow tie"},
      {0x7f7f8000, 0x7f80, "overflow tie -> inf (even)"},
      {0x7f7fffff, 0x7f80, "FLT_MAX -> inf"},
      {0xff7fffff, 0xff80, "-FLT_MAX -> -inf"},
      {0x7f800000, 0x7f80, "+inf"},
      {0xff800000, 0xff80, "-inf"},
      {0x00000000, 0x0000, "+0"},
      {0x80000000, 0x8000, "-0"},
      {0x00008000, 0x0000, "f32 denormal tie to 0 (kept, not flushed)"},
      {0x00018000, 0x0002, "f32 denormal tie up to even"},
      {0x007fffff, 0x0080, "largest f32 denormal rounds up to min normal"},
      {0x80010001, 0x8001, "negative denormal rounds to the bf16 denormal"},
      {0x00800000, 0x0080, "FLT_MIN"},
      {0x7fc00000, 0x7fc0, "quiet NaN"},
      {0xff800001, 0xffc0, "negative signalling NaN: quieted, sign kept"},
      {0x7fa5a5a5, 0x7fe5, "NaN payload top bits kept, quiet bit set"},
      {0x7fffffff, 0x7fff, "NaN with all-ones payload is not rounded into inf"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(BFloat16(float_of(c.f32_bits)).bits, c.expected) << c.what;
  }
}

// A stride through all 2^32 float patterns plus random ones, against the brute-force
// nearest-value search (no bit tricks shared with half.h).
TEST(HalfTest, MatchesNearestValueSearchOnManyFloats) {
  std::mt19937 rng(1234);
  std::vector<uint32_t> patterns;
  for (uint64_t b = 0; b < (1ull << 32); b += 9973) patterns.push_back(static_cast<uint32_t>(b));
  // Dense coverage of the f16 range, where all the rounding happens.
  std::uniform_int_distribution<uint32_t> in_range(0x32800000u, 0x47900000u);
  for (int i = 0; i < 200000; ++i) patterns.push_back(in_range(rng) | (rng() & 0x80000000u));
  for (uint32_t p : patterns) {
    const float f = float_of(p);
    if (std::isnan(f)) continue;  // NaNs are covered by the pattern tests
    ASSERT_EQ(Half(f).bits, reference_half(f)) << std::hex << p;
  }
}

TEST(BFloat16Test, MatchesNearestValueSearchOnManyFloats) {
  std::mt19937 rng(4321);
  std::vector<uint32_t> patterns;
  for (uint64_t b = 0; b < (1ull << 32); b += 9973) patterns.push_back(static_cast<uint32_t>(b));
  for (int i = 0; i < 200000; ++i) patterns.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t p : patterns) {
    const float f = float_of(p);
    if (std::isnan(f)) continue;
    ASSERT_EQ(BFloat16(f).bits, reference_bfloat16(f)) << std::hex << p;
  }
}

TEST(HalfTest, ConstexprAndLayout) {
  static_assert(Half(1.0f).bits == 0x3c00);
  static_assert(static_cast<float>(Half::from_bits(0x0001)) == 0x1p-24f);
  static_assert(static_cast<float>(BFloat16::from_bits(0x4049)) == 3.140625f);
  Half h[3] = {Half(1.0f), Half(2.0f), Half(-2.0f)};
  EXPECT_EQ(reinterpret_cast<const char*>(&h[1]) - reinterpret_cast<const char*>(&h[0]), 2);
  EXPECT_EQ(h[2].bits, 0xc000);
  EXPECT_EQ(Half().bits, 0);
  EXPECT_EQ(BFloat16().bits, 0);
}

}  // namespace
}  // namespace mixprec
