// softmax_rows_test.cpp: backend::cpu softmax_rows_{forward,backward} (the attention
// softmax) against float64 formulas written here: values rounded once to the dtype, IEEE
// rules for NaN / inf / -inf rows, independence of the thread count, and errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>

#include "backend/cpu/softmax_rows.h"
#include "mixprec/core/half.h"

namespace mixprec {
namespace {

using backend::cpu::softmax_rows_backward;
using backend::cpu::softmax_rows_forward;

std::vector<double> softmax64(const std::vector<double>& x, int64_t n) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(n); ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[r * n + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[r * n + j] - m);
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = std::exp(x[r * n + j] - m) / s;
  }
  return y;
}

// Relative error allowed: one rounding to dtype plus a few f32 ulps of arithmetic.
double rtol(DType dt) { return dt == DType::f32 ? 1e-6 : dt == DType::bf16 ? 0x1p-8 : 0x1p-10; }
// Absolute floor: f16 probabilities below 2^-14 are subnormal, spaced 2^-24 apart, so one
// rounding errs by up to 2^-25 whatever their size (bf16 and f32 keep f32's range).
double atol(DType dt) { return dt == DType::f16 ? 0x1p-25 : 1e-30; }

void check_forward_backward(DType dt, int64_t rows, int64_t n) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(n));
  const Tensor x = Tensor::uniform({rows, n}, -8, 8).to(dt);
  const Tensor y = softmax_rows_forward(x);
  ASSERT_EQ(y.dtype(), dt);
  const std::vector<double> want = softmax64(x.to_vector_f64(), n), got = y.to_vector_f64();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rtol(dt) * want[i] + atol(dt)) << "y element " << i;
  // Backward from the stored y (rounded to dt), as the kernel defines it.
  const Tensor dy = Tensor::uniform({rows, n}, -1, 1).to(dt);
  const std::vector<double> yv = got, g = dy.to_vector_f64();
  const std::vector<double> dx = softmax_rows_backward(y, dy).to_vector_f64();
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) s += g[r * n + j] * yv[r * n + j];
    for (int64_t j = 0; j < n; ++j) mag = std::max(mag, std::fabs(yv[r * n + j]) * (std::fabs(g[r * n + j]) + 1));
    for (int64_t j = 0; j < n; ++j) {
      const double want_dx = yv[r * n + j] * (g[r * n + j] - s);
      // Cancellation in dy - s: bound by the row's magnitude, not the element's value.
      ASSERT_NEAR(dx[r * n + j], want_dx, rtol(dt) * std::fabs(want_dx) + 1e-6 * mag + atol(dt))
          << "dx row " << r << " col " << j;
    }
  }
}

TEST(SoftmaxRows, MatchesFloat64) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    check_forward_backward(dt, 300, 128);  // threaded, whole vectors
    check_forward_backward(dt, 3, 37);     // serial, a partial last vector
    check_forward_backward(dt, 2, 1);      // y = 1
    check_forward_backward(dt, 2, 2000);   // longer than the stack buffer
  }
}

TEST(SoftmaxRows, NonFiniteRowsFollowIeee) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const Tensor x = Tensor::from_vector_f64({0, -inf, 0, -inf,     // masked: 0.5, 0, 0.5, 0
                                            1, nan, 2, 3,         // NaN anywhere: all NaN
                                            inf, 1, 2, 3,         // +inf: inf - inf = NaN
                                            -inf, -inf, -inf, -inf, // fully masked: NaN
                                            0, -200, 0, 0},       // -200: exp underflows to 0
                                           {5, 4}, DType::bf16);
  const std::vector<double> y = softmax_rows_forward(x).to_vector_f64();
  EXPECT_EQ((std::vector<double>{y[0], y[1], y[2], y[3]}), (std::vector<double>{0.5, 0, 0.5, 0}));
  for (int i = 4; i < 16; ++i) EXPECT_TRUE(std::isnan(y[size_t(i)])) << "element " << i;
  EXPECT_EQ(y[17], 0.0);
  EXPECT_NEAR(y[16], 1.0 / 3.0, 0x1p-8);
}

TEST(SoftmaxRows, SameBitsForOneAndTwoThreads) {
  const Tensor x = Tensor::uniform({513, 128}, -5, 5).to(DType::bf16);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<double> one = softmax_rows_forward(x).to_vector_f64();
  omp_set_num_threads(std::max(2, saved));
  const std::vector<double> two = softmax_rows_forward(x).to_vector_f64();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(SoftmaxRows, RejectsWhatItCannotRun) {
  EXPECT_THROW(softmax_rows_forward(Tensor::zeros({2, 3}, DType::f64)), Error);
  const Tensor t = Tensor::zeros({4, 6});
  EXPECT_THROW(softmax_rows_forward(t.as_strided({6, 4}, {1, 6}, 0)), Error);
  EXPECT_THROW(softmax_rows_backward(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), Error);
  EXPECT_THROW(softmax_rows_backward(Tensor::zeros({2, 3}), Tensor::zeros({2, 3}, DType::bf16)), Error);
}

}  // namespace
}  // namespace mixprec
