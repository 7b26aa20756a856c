// log_test.cpp: backend::cpu::log_forward (f32 log: Cephes' polynomial with AVX-512, the C
// library's logf without it, as the _no_avx512 twin runs) against log in double, rounded to
// f32, over every exponent: at most 2 ulp of the f32 result (Cephes' peak is ~1), including
// inputs within a few ulp of 1, where oneDNN's log was off by up to 3.7e-6 absolutely; the IEEE
// cases (+-0, negatives, +inf, NaN, denormals) as PyTorch's; and mixprec::log on f32 routes
// here (the same bits, contiguous or channels-last).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/log.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

Tensor f32(const std::vector<float>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::f32);
  std::copy(v.begin(), v.end(), static_cast<float*>(t.data()));
  return t;
}

std::vector<float> values(const Tensor& t) {
  const float* p = static_cast<const float*>(t.data());
  return std::vector<float>(p, p + t.numel());
}

// Distance in ulps between two finite floats of the same sign (or zero).
int64_t ulps(float a, float b) {
  auto key = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t(std::numeric_limits<int32_t>::min()) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

TEST(Log, WithinTwoUlpOfDoubleOverEveryExponent) {
  std::vector<float> x;
  std::mt19937 g(7);
  // Random mantissas at every exponent, denormals included (bit patterns 1 .. 0x7f7fffff).
  for (uint32_t e = 0; e < 255; ++e)
    for (int k = 0; k < 400; ++k)
      x.push_back(std::bit_cast<float>(uint32_t((e << 23) | (uint32_t(g()) & 0x7fffffu) | (e == 0 ? 1u : 0u))));
  // Within 2000 ulp of 1 on both sides: log is tiny there and its relative error shows.
  for (int k = -2000; k <= 2000; ++k)
    x.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(1.0f) + uint32_t(k)));
  x.push_back(std::numeric_limits<float>::max());
  x.push_back(std::numeric_limits<float>::denorm_min());
  const std::vector<float> got = values(backend::cpu::log_forward(f32(x)));
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float ref = float(std::log(double(x[i])));
    const int64_t d = ulps(got[i], ref);
    if (d > worst) worst = d, worst_x = x[i];
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worst_x;
  EXPECT_EQ(values(backend::cpu::log_forward(f32({1.0f})))[0], 0.0f);  // oneDNN gave -1.43e-6
}

TEST(Log, IeeeCasesAsPyTorch) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> got = values(backend::cpu::log_forward(f32({0.0f, -0.0f, -1.0f, -inf, inf, nan, 1e-40f})));
  EXPECT_EQ(got[0], -inf);
  EXPECT_EQ(got[1], -inf);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_EQ(got[4], inf);
  EXPECT_TRUE(std::isnan(got[5]));
  EXPECT_NEAR(got[6], std::log(1e-40), 1e-4);  // a denormal is its own value, not the smallest normal
}

TEST(Log, TheOpRoutesF32HereInEveryLayout) {
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(1e-3f, 10.0f);
  std::vector<float> v(2 * 3 * 40 * 50);  // > the kernel's parallel threshold
  for (float& f : v) f = u(g);
  Tensor x = f32(v).as_strided({2, 3, 40, 50}, {6000, 2000, 50, 1}, 0);
  const std::vector<float> direct = values(backend::cpu::log_forward(x));
  const std::vector<float> op = values(log(x));
  ASSERT_EQ(direct.size(), op.size());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(op[i]), std::bit_cast<uint32_t>(direct[i]));
  Tensor cl = x.to_memory_format(MemoryFormat::channels_last);
  Tensor back = log(cl).to_memory_format(MemoryFormat::contiguous);
  const std::vector<float> again = values(back);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(again[i]), std::bit_cast<uint32_t>(direct[i]));
  EXPECT_TRUE(backend::cpu::log_applies(x));
  EXPECT_FALSE(backend::cpu::log_applies(x.to(DType::bf16)));
}

}  // namespace
}  // namespace mixprec
