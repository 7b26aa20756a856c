// f16_range_test.cpp: what float16 does to a value (mixprec/core/f16_range.h), the definition
// `mixprec inspect` and train's gradient-underflow telemetry share. Values just above and
// below each threshold, counted one by one (f16_range) and in bulk (count_f16_range) in every
// floating dtype, at a loss scale, and on a tensor large enough to split over threads; the
// expected counts are worked out by hand from the thresholds 2^-25, 2^-14 and 65520.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "mixprec/core/f16_range.h"
#include "mixprec/core/half.h"

namespace mixprec {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

double below(double x) { return std::nextafter(float(x), 0.0f); }  // next f32 towards 0
double above(double x) { return std::nextafter(float(x), float(kInf)); }

TEST(F16Range, EachValueAgainstTheThresholds) {
  EXPECT_EQ(f16_range(0.0), F16Range::zero);
  EXPECT_EQ(f16_range(-0.0), F16Range::zero);
  EXPECT_EQ(f16_range(0x1p-30), F16Range::flushed);
  EXPECT_EQ(f16_range(0x1p-25), F16Range::flushed);  // the tie rounds to the even 0
  EXPECT_EQ(f16_range(-0x1p-25), F16Range::flushed);
  EXPECT_EQ(f16_range(above(0x1p-25)), F16Range::subnormal);  // rounds up to 2^-24
  EXPECT_EQ(f16_range(0x1p-24), F16Range::subnormal);         // the smallest subnormal
  EXPECT_EQ(f16_range(below(0x1p-14)), F16Range::subnormal);
  EXPECT_EQ(f16_range(0x1p-14), F16Range::normal);  // the smallest normal
  EXPECT_EQ(f16_range(65504.0), F16Range::normal);
  EXPECT_EQ(f16_range(below(65520.0)), F16Range::normal);  // rounds down to 65504
  EXPECT_EQ(f16_range(65520.0), F16Range::overflow);
  EXPECT_EQ(f16_range(-1e30), F16Range::overflow);
  EXPECT_EQ(f16_range(kInf), F16Range::nonfinite);
  EXPECT_EQ(f16_range(kNaN), F16Range::nonfinite);
  // The thresholds are what f16 rounding does: check against the conversion itself.
  EXPECT_EQ(float(Half(float(0x1p-25))), 0.0f);
  EXPECT_EQ(float(Half(float(above(0x1p-25)))), float(0x1p-24));
  EXPECT_TRUE(std::isinf(float(Half(65520.0f))));
  EXPECT_EQ(float(Half(float(below(65520.0)))), 65504.0f);
}

// 14 values: 1 zero, 3 flushed, 3 subnormal, 3 normal, 2 overflow, 2 non-finite.
const std::vector<double> kValues = {0.0,
                                     0x1p-30, 0x1p-25, -0x1p-25,
                                     above(0x1p-25), -0x1p-24, below(0x1p-14),
                                     0x1p-14, -1.0, below(65520.0),
                                     65520.0, -1e6,
                                     kInf, kNaN};

TEST(F16Range, CountsInF32AndF64) {
  for (DType d : {DType::f32, DType::f64}) {
    const F16RangeCounts c = count_f16_range(Tensor::from_vector_f64(kValues, {2, 7}, d));
    EXPECT_EQ(c.values, 14) << dtype_name(d);
    EXPECT_EQ(c.flushed, 3) << dtype_name(d);
    EXPECT_EQ(c.subnormal, 3) << dtype_name(d);
    EXPECT_EQ(c.overflow, 2) << dtype_name(d);
    EXPECT_EQ(c.nonfinite, 2) << dtype_name(d);
    for (double v : kValues) {  // the bulk count agrees with the one-value classification
      const F16RangeCounts one = count_f16_range(Tensor::from_vector_f64({v}, {1}, d));
      const F16Range r = f16_range(v);
      EXPECT_EQ(one.flushed, r == F16Range::flushed) << v;
      EXPECT_EQ(one.subnormal, r == F16Range::subnormal) << v;
      EXPECT_EQ(one.overflow, r == F16Range::overflow) << v;
      EXPECT_EQ(one.nonfinite, r == F16Range::nonfinite) << v;
    }
  }
}

TEST(F16Range, F64KeepsItsPrecisionAtTheTie) {
  // 2^-25 (1 + 2^-40) is not an f32, and rounds up in f16: a subnormal, not flushed.
  const F16RangeCounts c = count_f16_range(Tensor::from_vector_f64({0x1p-25 * (1 + 0x1p-40)}, {1}));
  EXPECT_EQ(c.subnormal, 1);
  EXPECT_EQ(c.flushed, 0);
}

// Gradients computed at loss scale S: the values the backward produced are S x the true
// ones. With S = 1024 (2^10), true values of 2^-35 reach exactly the tie 2^-25.
TEST(F16Range, CountsAtALossScale) {
  const std::vector<double> grads = {0x1p-35, above(0x1p-35),     // flushed, subnormal
                                     below(0x1p-24), 0x1p-24,     // subnormal, normal (2^-14)
                                     below(64.0 - 1.0 / 64), 64.0};  // 65520 - ...: normal; 65536: overflow
  const Tensor t = Tensor::from_vector_f64(grads, {6}, DType::f32);
  const F16RangeCounts scaled = count_f16_range(t, 1024.0f);
  EXPECT_EQ(scaled.flushed, 1);
  EXPECT_EQ(scaled.subnormal, 2);
  EXPECT_EQ(scaled.overflow, 1);
  const F16RangeCounts unscaled = count_f16_range(t);  // all tiny but 64: flushed below 2^-25
  EXPECT_EQ(unscaled.flushed, 2);
  EXPECT_EQ(unscaled.subnormal, 2);
  EXPECT_EQ(unscaled.overflow, 0);
}

TEST(F16Range, SixteenBitTensors) {
  // Already f16: what f16 flushed is 0 by now, and only subnormals remain to count.
  const Tensor h = Tensor::from_vector_f64({0x1p-24, 0x1p-15, 0x1p-14, 0x1p-26, 0.0, kInf}, {6}, DType::f16);
  const F16RangeCounts ch = count_f16_range(h);
  EXPECT_EQ(ch.subnormal, 2);
  EXPECT_EQ(ch.flushed, 0);  // 2^-26 became 0 when the tensor was made
  EXPECT_EQ(ch.nonfinite, 1);
  // bf16 has f32's exponent range: 2^-26 and 2^-30 are ordinary bf16 values, flushed by f16.
  const Tensor b = Tensor::from_vector_f64({0x1p-26, 0x1p-30, 0x1p-20, 1.0, 70000.0}, {5}, DType::bf16);
  const F16RangeCounts cb = count_f16_range(b);
  EXPECT_EQ(cb.flushed, 2);
  EXPECT_EQ(cb.subnormal, 1);
  EXPECT_EQ(cb.overflow, 1);
}

TEST(F16Range, LargeTensorsCountTheSameOnAnyThreadCount) {
  // 300,000 elements (several tiles per thread), a class per index mod 5: hand-countable.
  const int64_t n = 300000;
  std::vector<double> v(n);
  const double pattern[5] = {0x1p-26, 0x1p-20, 1.0, 0.0, 1e5};  // flushed, subnormal, normal, zero, overflow
  for (int64_t i = 0; i < n; ++i) v[i] = pattern[i % 5] * (i % 2 ? -1 : 1);
  for (DType d : {DType::f32, DType::bf16}) {
    const Tensor t = Tensor::from_vector_f64(v, {n}, d);
    const int saved = omp_get_max_threads();
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const F16RangeCounts c = count_f16_range(t);
      EXPECT_EQ(c.flushed, n / 5) << threads;
      EXPECT_EQ(c.subnormal, n / 5) << threads;
      EXPECT_EQ(c.overflow, n / 5) << threads;
      EXPECT_EQ(c.nonfinite, 0) << threads;
    }
    omp_set_num_threads(saved);
  }
}

TEST(F16Range, RefusesIntegerTensorsAndViewsWithGaps) {
  try {
    count_f16_range(Tensor::from_vector_i64({1, 2}, {2}));
    FAIL() << "an int64 tensor was counted";
  } catch (const Error& e) {
    EXPECT_NE(e.status().message().find("floating"), std::string::npos) << e.status().message();
  }
  // Every other element of a buffer (stride 2): a view with gaps.
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{0x1p-20f, 1.0f, 0x1p-30f, 1.0f});
  const Tensor every_other = Tensor::from_external(buffer->data(), {2}, {2}, DType::f32, buffer);
  try {
    count_f16_range(every_other);
    FAIL() << "a view with gaps was counted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(e.status().message().find("dense"), std::string::npos) << e.status().message();
  }
  // The whole buffer is dense: counted.
  const F16RangeCounts whole = count_f16_range(Tensor::from_external(buffer->data(), {4}, {1}, DType::f32, buffer));
  EXPECT_EQ(whole.subnormal, 1);
  EXPECT_EQ(whole.flushed, 1);
}

}  // namespace
}  // namespace mixprec
