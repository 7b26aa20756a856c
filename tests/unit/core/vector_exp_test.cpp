// vector_exp_test.cpp: exp_f64_avx512 (core/vector_exp.h), the float64 exp of the loss
// kernels, against std::exp (glibc's, correctly rounded in nearly every case): within 2 ulp
// of double over the range the losses use, exact 1 at 0, and the documented edges (NaN, the
// flush to +0 below -708, +inf above 709).
#include "core/vector_exp.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"

namespace mixprec {
namespace {

__attribute__((target("avx512f"))) std::vector<double> exp8(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); i += 8) _mm512_storeu_pd(out.data() + i, exp_f64_avx512(_mm512_loadu_pd(x.data() + i)));
  return out;
}

int64_t ulps(double a, double b) {
  const int64_t ia = std::bit_cast<int64_t>(a), ib = std::bit_cast<int64_t>(b);
  return ia > ib ? ia - ib : ib - ia;  // both positive here
}

TEST(VectorExpF64, WithinTwoUlpOfStdExpFromMinus708To709) {
  if (!cpu_features().avx512f) GTEST_SKIP() << "this CPU has no AVX-512 (the loss kernels then call std::exp)";
  std::mt19937_64 gen(7);
  std::vector<double> x;
  std::uniform_real_distribution<double> wide(-708.0, 709.0), near(-40.0, 1.0);
  for (int i = 0; i < 40000; ++i) x.push_back(i % 2 ? wide(gen) : near(gen));
  for (double v : {0.0, -0.0, 1e-300, -1e-300, 0.5, -0.5, 1.0, -1.0, std::log(2.0), -std::log(2.0), -708.0, 709.0})
    x.push_back(v);
  while (x.size() % 8) x.push_back(0.0);
  const std::vector<double> got = exp8(x);
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t d = ulps(got[i], std::exp(x[i]));
    worst = std::max(worst, d);
    ASSERT_LE(d, 2) << "exp(" << x[i] << ") = " << got[i] << ", std::exp " << std::exp(x[i]);
  }
  EXPECT_EQ(exp8({0, 0, 0, 0, 0, 0, 0, 0})[0], 1.0);
  RecordProperty("worst_ulp", int(worst));
}

TEST(VectorExpF64, EdgesNanFlushAndOverflow) {
  if (!cpu_features().avx512f) GTEST_SKIP() << "this CPU has no AVX-512";
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> got = exp8({nan, -inf, -709.0, -1000.0, 710.0, inf, -707.9, 708.0});
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], 0.0);
  EXPECT_EQ(got[2], 0.0);  // below -708: +0, as documented
  EXPECT_EQ(got[3], 0.0);
  EXPECT_EQ(got[4], inf);
  EXPECT_EQ(got[5], inf);
  EXPECT_LE(ulps(got[6], std::exp(-707.9)), 2);
  EXPECT_LE(ulps(got[7], std::exp(708.0)), 2);
}

}  // namespace
}  // namespace mixprec
