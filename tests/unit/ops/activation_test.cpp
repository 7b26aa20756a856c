// activation_test.cpp: gelu, dropout and pow forward values against hand-computed numbers and
// float64 math (gelu in f32/bf16/f16 forward and backward; every 16-bit pattern), dropout's
// mask and scaling.
#include "mixprec/ops/ops.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/tensor_checks.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/nn.h"

namespace mixprec {
namespace {

using test::bits_equal;
using test::error_of;
using test::expect_all_near;
using test::f64;

// ---- gelu, dropout, pow ----

TEST(Activation, GeluMatchesTabulatedValues) {
  // x * Phi(x): Phi(1) = 0.841344746068543, Phi(2) = 0.977249868051821, Phi(-1) = 1 - Phi(1).
  const Tensor y = gelu(f64({0.0, 1.0, -1.0, 2.0}, {4}));
  expect_all_near(y, {0.0, 0.841344746068543, -0.158655253931457, 1.954499736103642}, 1e-14);
}

TEST(Activation, GeluInEveryFloatDtypeMatchesF64ForwardAndBackward) {
  // 4001 points on [-10, 10] (both tails, where 1 + erf cancels) plus a tail beyond the
  // vector width, through the f32/bf16/f16 path and the f64 one (libm erf in double).
  std::vector<double> xs;
  for (int i = 0; i <= 4000; ++i) xs.push_back(-10.0 + 0.005 * i);
  const Tensor x64 = f64(xs, {int64_t(xs.size())});
  const Tensor g64 = Tensor::full(x64.shape(), 0.75, DType::f64);  // exact in bf16
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = x64.to(dt).detach().requires_grad_(true);
    const Tensor y = gelu(x);
    y.backward(g64.to(dt));
    // The f64 reference at the rounded inputs.
    Tensor a = x.detach().to(DType::f64).requires_grad_(true);
    const Tensor y_ref = gelu(a);
    y_ref.backward(g64);
    const std::vector<double> xv = a.to_vector_f64(), yr = y_ref.to_vector_f64(),
                              dr = a.grad().to_vector_f64(), yv = y.to_vector_f64(),
                              dv = x.grad().to_vector_f64();
    // f32: relative 2e-7 * (4 + x^2): the erfc polynomial is good to 1.2e-7 and expf to ~1
    // ulp, but on the negative tail the exponent -x^2/2 is itself rounded to f32 (an error
    // of ~x^2 * 2^-24 that exp turns into a relative one: 3.2e-6 at x = -6); plus 1e-14
    // absolute: the f64 reference computes 1 + erf(x / sqrt 2), which cancels to 0 below
    // x ~ -8.3 (the f32 path keeps e.g. -7.6e-23 at -10). The gradient g (Phi + x phi)
    // cancels near x = -0.75, so its error is relative to g (|Phi| + |x phi|) <= 0.75 * 1.2.
    // bf16: one rounding of the output (2^-8 relative); f16 (2^-11), plus half its subnormal
    // spacing (2^-25) absolute: the negative tail's tiny results round to f16 subnormals.
    const double rel = dt == DType::f32 ? 2e-7 : dt == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
    const double abs_floor = dt == DType::f16 ? 0x1.0p-25 : 1e-14;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double r = rel * (4 + xv[i] * xv[i]);
      ASSERT_NEAR(yv[i], yr[i], r * std::fabs(yr[i]) + abs_floor) << "x = " << xv[i];
      ASSERT_NEAR(dv[i], dr[i], r * 0.9 + abs_floor) << "x = " << xv[i];
    }
  }
}

// Every bf16 and f16 bit pattern through gelu and its backward: the 16-bit route looks the
// values up, so each result must be the correctly rounded one, computed here from double math
// (x Phi(x) with Phi from erfc, which keeps the negative tail's relative accuracy) and
// convert's f64 -> 16-bit rounding; the backward must be g times the slope Phi + x phi
// rounded to f32, rounded once to the dtype. NaN patterns give NaN; -inf gives NaN (-inf * 0).
TEST(Activation, Gelu16BitIsCorrectlyRoundedForEveryBitPattern) {
  constexpr int64_t kPatterns = 65536;
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<uint16_t> bits(kPatterns);
    for (int64_t i = 0; i < kPatterns; ++i) bits[size_t(i)] = uint16_t(i);
    Tensor x = Tensor::empty({kPatterns}, dt);
    std::memcpy(x.data(), bits.data(), bits.size() * 2);
    const std::vector<double> xv = x.to_vector_f64();
    std::vector<double> y_ref(kPatterns), slope(kPatterns);
    for (int64_t i = 0; i < kPatterns; ++i) {
      const double v = xv[size_t(i)], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
      y_ref[size_t(i)] = v * cdf;
      slope[size_t(i)] = double(float(cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI)));
    }
    const Tensor want = Tensor::from_vector_f64(y_ref, {kPatterns}).to(dt);
    Tensor xg = x.detach().requires_grad_(true);
    const Tensor y = gelu(xg);
    ASSERT_EQ(y.dtype(), dt);
    const std::vector<double> yv = y.to_vector_f64(), wv = want.to_vector_f64();
    for (int64_t i = 0; i < kPatterns; ++i) {
      if (std::isnan(wv[size_t(i)])) {
        ASSERT_TRUE(std::isnan(yv[size_t(i)])) << "pattern " << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(static_cast<const uint16_t*>(y.data()) + i, static_cast<const uint16_t*>(want.data()) + i, 2), 0)
          << "pattern " << i << " x = " << xv[size_t(i)] << ": " << yv[size_t(i)] << " vs " << wv[size_t(i)];
    }
    // Backward with a gradient of mixed signs and magnitudes (exact in both dtypes).
    std::vector<double> gv(kPatterns), dx_ref(kPatterns);
    for (int64_t i = 0; i < kPatterns; ++i) {
      gv[size_t(i)] = (i % 3 == 0 ? -1.0 : 1.0) * (0.5 + 0.25 * double(i % 7));
      dx_ref[size_t(i)] = double(float(gv[size_t(i)]) * float(slope[size_t(i)]));  // f32 product, as the kernel
    }
    y.backward(Tensor::from_vector_f64(gv, {kPatterns}).to(dt));
    const Tensor dwant = Tensor::from_vector_f64(dx_ref, {kPatterns}).to(dt);
    const Tensor& dx = xg.grad();
    ASSERT_EQ(dx.dtype(), dt);
    for (int64_t i = 0; i < kPatterns; ++i) {
      if (std::isnan(slope[size_t(i)])) continue;
      ASSERT_EQ(std::memcmp(static_cast<const uint16_t*>(dx.data()) + i, static_cast<const uint16_t*>(dwant.data()) + i, 2), 0)
          << "pattern " << i << " x = " << xv[size_t(i)];
    }
  }
}

TEST(Activation, DropoutIsIdentityInEvalOrWithZeroP) {
  const Tensor x = f64({1, 2, 3}, {3});
  EXPECT_TRUE(dropout(x, 0.5, false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).same(x));
}

TEST(Activation, DropoutDropsAboutPAndScalesKeptValues) {
  const int64_t n = 100000;
  const double p = 0.3;
  manual_seed(123);
  const Tensor y = dropout(Tensor::ones({n}), p, true);
  const std::vector<double> v = y.to_vector_f64();
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0.0) {
      ++zeros;
    } else {
      EXPECT_EQ(e, double(float(1.0 / (1.0 - p))));  // 1/(1-p) rounded once to f32
    }
  }
  // Binomial std of the fraction: sqrt(p (1-p) / n) = 0.00145; 5 sigma.
  EXPECT_NEAR(double(zeros) / double(n), p, 0.0073);
}

TEST(Activation, DropoutMaskFollowsManualSeed) {
  manual_seed(5);
  const Tensor a = dropout(Tensor::ones({64}), 0.5, true);
  const Tensor b = dropout(Tensor::ones({64}), 0.5, true);
  manual_seed(5);
  const Tensor c = dropout(Tensor::ones({64}), 0.5, true);
  EXPECT_TRUE(bits_equal(a, c));
  EXPECT_FALSE(bits_equal(a, b));  // the generator advanced
}

TEST(Activation, DropoutMaskDoesNotDependOnTheThreadCountAndHasNoRunsOfPairs) {
  // Large enough for the parallel path; the same seed on 1 and 2 threads, the same mask.
  const int64_t n = (int64_t(1) << 16) + 3;  // odd: the last element takes half a draw
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  manual_seed(11);
  const Tensor one = dropout(Tensor::ones({n}), 0.5, true);
  omp_set_num_threads(2);
  manual_seed(11);
  const Tensor two = dropout(Tensor::ones({n}), 0.5, true);
  omp_set_num_threads(before);
  EXPECT_TRUE(bits_equal(one, two));
  // The two halves of one draw are independent: neighbours agree about half the time (each
  // element is kept with probability 1/2), not always.
  const std::vector<double> v = one.to_vector_f64();
  int64_t same = 0;
  for (int64_t i = 0; i + 1 < n; i += 2) same += (v[size_t(i)] == 0.0) == (v[size_t(i + 1)] == 0.0);
  EXPECT_NEAR(double(same) / double(n / 2), 0.5, 0.02);
}

TEST(Activation, PowMatchesHandValues) {
  expect_all_near(pow(f64({2, -3, 0.5}, {3}), 2.0), {4, 9, 0.25}, 0.0);
  expect_all_near(pow(f64({4, 9, 0.25}, {3}), 0.5), {2, 3, 0.5}, 0.0);
  expect_all_near(pow(f64({2, -4, 0.5}, {3}), -1.0), {0.5, -0.25, 2}, 0.0);
  expect_all_near(pow(f64({2, -3}, {2}), 3.0), {8, -27}, 0.0);
}

}  // namespace
}  // namespace mixprec
