// convert_f32_f64_test.cpp: convert_elements between f32 and f64 (AVX-512 kernels where the
// CPU has them, else the scalar casts) against static_cast, bit for bit: random patterns
// (NaNs, a signalling one included, infinities, subnormals), doubles near f32's range and
// precision (ties, overflow, f32 subnormals), every tail length, and no write past the end.
// Large enough (100003) that the conversion runs in parallel chunks too.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/convert.h"

namespace mixprec {
namespace {

float float_of(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

TEST(ConvertF32F64, VectorKernelsMatchTheScalarCasts) {
  std::mt19937 rng(23);
  std::vector<float> f(100003);
  for (auto& x : f) x = float_of(static_cast<uint32_t>(rng()));
  f[0] = float_of(0x7f800001u);  // signalling NaN
  f[1] = float_of(0x00000001u);  // smallest subnormal
  std::vector<double> wide(f.size());
  convert_elements(f.data(), DType::f32, wide.data(), DType::f64, static_cast<int64_t>(f.size()));
  for (size_t i = 0; i < f.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint64_t>(wide[i]), std::bit_cast<uint64_t>(static_cast<double>(f[i]))) << i;
  std::mt19937_64 rng64(29);
  std::vector<double> d(100003);
  for (auto& x : d) x = std::bit_cast<double>(static_cast<uint64_t>(rng64()));
  // Near f32's range and precision: ties, overflow, f32 subnormals.
  for (size_t i = 0; i < d.size(); i += 3)
    d[i] = std::ldexp(1.0 + double(rng64() % 4096) * 0x1p-28, int(rng64() % 300) - 160);  // 1/32: ties
  std::vector<float> narrow(d.size());
  convert_elements(d.data(), DType::f64, narrow.data(), DType::f32, static_cast<int64_t>(d.size()));
  for (size_t i = 0; i < d.size(); ++i)
    ASSERT_EQ(bits_of(narrow[i]), bits_of(static_cast<float>(d[i]))) << i << " = " << d[i];
  for (int64_t n = 0; n < 40; ++n) {  // every tail length
    std::vector<float> out(size_t(n) + 1, 7.0f);
    convert_elements(d.data(), DType::f64, out.data(), DType::f32, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[size_t(i)]), bits_of(static_cast<float>(d[size_t(i)])));
    ASSERT_EQ(out[size_t(n)], 7.0f) << "wrote past the end at n = " << n;
  }
}

}  // namespace
}  // namespace mixprec
