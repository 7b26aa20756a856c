// layer_norm_row_kernels_test.cpp: layer_norm_rows' row kernels for f32, bf16 and f16 rows
// (on AVX-512: the hand-written kernels), on rows of odd lengths whose values span many
// binades, three ways:
//  - RoundsOnceAsConvertDoes: a 16-bit row and the same values as an f32 row run the same
//    double arithmetic, so mean, rstd, dw and db must be bit-identical, and each 16-bit output
//    must be the f32 output rounded to 16 bits (the double rounded once; where the f32 output
//    is itself a 16-bit midpoint, either neighbour). Holds on every route (the _no_avx512 twin
//    runs the general bodies).
//  - AgreesWithTheBaselineBodies: against forward_row_baseline / backward_row_baseline (the
//    route MIXPREC_CPU_DISABLE=avx512f takes). The two compute the same formulas in double
//    but sum the rows in different orders (8 lanes here, the compiler's choice there) and
//    fuse different multiply-adds, so their doubles differ in the last bits; y and dx, rounded
//    once to the row's type, must still agree bit for bit on rows within 2^24 of range, and
//    on rows spanning 2^80 (where dx's terms cancel by up to ~2^-40) to the last bits' worth
//    of the terms. db: the same exact sums in the same order, bit for bit; dw to 1e-13 of
//    its terms' magnitude.
//  - RoundsOnceAtMidpoints: outputs built to sit just off a 16-bit midpoint, where rounding
//    through f32 to nearest would round the wrong way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "backend/cpu/layer_norm_rows.h"
#include "core/convert.h"

namespace mixprec {
namespace {

namespace ln = backend::cpu::layer_norm_rows;

// rows x d values of dt: offset + sign * 2^e * (1 + u), e uniform in [lo, hi], rounded to dt
// (f16's subnormals appear for lo < -14; the offset keeps the mean away from 0).
std::vector<char> random_rows(DType dt, int64_t rows, int64_t d, int lo, int hi, double offset, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> e(lo, hi);
  std::vector<double> v(size_t(rows * d));
  for (double& x : v) x = offset + (u(rng) < 0.5 ? -1.0 : 1.0) * std::ldexp(1.0 + u(rng), e(rng));
  std::vector<char> out(v.size() * dtype_size(dt));
  convert_elements(v.data(), DType::f64, out.data(), dt, int64_t(v.size()));
  return out;
}

// One unit in the last place of dt at |v| (subnormal spacing below the normal range).
double ulp_of(DType dt, double v) {
  const int p = dt == DType::bf16 ? 8 : dt == DType::f16 ? 11 : 24;
  const int emin = dt == DType::f16 ? -14 : -126;
  int e = 0;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, emin) - (p - 1));
}

void check_baseline(DType dt, int64_t d, int lo, int hi, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " d=" + std::to_string(d) + " exponents " + std::to_string(lo) + ".." +
               std::to_string(hi));
  const int64_t rows = 5;
  const size_t bytes = size_t(rows * d) * dtype_size(dt);
  const std::vector<char> x = random_rows(dt, rows, d, lo, hi, 3.0, seed);
  const std::vector<char> dy = random_rows(dt, rows, d, lo, hi, 0.0, seed + 1);
  std::mt19937_64 rng(seed + 2);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const size_t nd = static_cast<size_t>(d);
  std::vector<double> w(nd), b(nd);
  for (int64_t j = 0; j < d; ++j) {
    w[size_t(j)] = 1.0 + 0.5 * u(rng);
    b[size_t(j)] = u(rng);
  }
  std::vector<char> y_fast(bytes), y_base(bytes), dx_fast(bytes), dx_base(bytes);
  std::vector<double> dw_fast(nd), db_fast(nd), dw_base(nd), db_base(nd), dw_mag(nd);
  std::vector<double> scale[2] = {std::vector<double>(size_t(rows) * nd), std::vector<double>(size_t(rows) * nd)};
  ln::Scratch s;
  for (int64_t r = 0; r < rows; ++r) {
    double mf = 0, rf = 0, mb = 0, rb = 0;
    ln::forward_row(x.data(), dt, r, d, w.data(), b.data(), 1e-5, y_fast.data(), mf, rf, s);
    ln::forward_row_baseline(x.data(), dt, r, d, w.data(), b.data(), 1e-5, y_base.data(), mb, rb, s);
    ASSERT_NEAR(mf, mb, 1e-14 * std::fabs(mb)) << "row " << r;
    ASSERT_NEAR(rf, rb, 1e-14 * rb) << "row " << r;
    ln::backward_row(x.data(), dt, dy.data(), dt, r, d, w.data(), mf, rf, dx_fast.data(), dw_fast.data(),
                     db_fast.data(), s);
    ln::backward_row_baseline(x.data(), dt, dy.data(), dt, r, d, w.data(), mb, rb, dx_base.data(),
                              dw_base.data(), db_base.data(), s);
    // The terms' magnitudes: y = (x - mean) * rstd * w + b, dx = rstd * (g - mean(g) -
    // xhat * mean(g * xhat)) with g = dy * w; mean's own error scales with mean(|x|).
    double ax = 0, ag = 0, agx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xv = load_as_double(x.data(), dt, r * d + j), g = load_as_double(dy.data(), dt, r * d + j) * w[j];
      ax += std::fabs(xv) / double(d);
      ag += std::fabs(g) / double(d);
      agx += std::fabs(g * (xv - mb) * rb) / double(d);
    }
    for (int64_t j = 0; j < d; ++j) {
      const double xv = load_as_double(x.data(), dt, r * d + j), g = load_as_double(dy.data(), dt, r * d + j);
      const double xh = (std::fabs(xv) + ax) * rb;
      dw_mag[size_t(j)] += std::fabs(g) * xh;
      scale[0][size_t(r * d + j)] = xh * std::fabs(w[j]) + std::fabs(b[j]);
      scale[1][size_t(r * d + j)] = rb * (std::fabs(g * w[j]) + ag + xh * agx);
    }
  }
  const size_t es = dtype_size(dt);
  const bool exact = hi - lo <= 24;
  for (int64_t i = 0; i < rows * d; ++i) {
    for (int out = 0; out < 2; ++out) {
      const std::vector<char>& f = out == 0 ? y_fast : dx_fast;
      const std::vector<char>& g = out == 0 ? y_base : dx_base;
      if (std::memcmp(&f[size_t(i) * es], &g[size_t(i) * es], es) == 0) continue;
      const double a = load_as_double(f.data(), dt, i), c = load_as_double(g.data(), dt, i);
      ASSERT_FALSE(exact) << (out == 0 ? "y" : "dx") << " element " << i << ": " << a << " vs " << c;
      ASSERT_LE(std::fabs(a - c), 1e-12 * scale[size_t(out)][size_t(i)] + ulp_of(dt, c))
          << (out == 0 ? "y" : "dx") << " element " << i << ": " << a << " vs " << c;
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    ASSERT_EQ(db_fast[size_t(j)], db_base[size_t(j)]) << "db " << j;
    ASSERT_NEAR(dw_fast[size_t(j)], dw_base[size_t(j)], 1e-13 * dw_mag[size_t(j)]) << "dw " << j;
  }
}

TEST(LayerNormRowKernels, AgreesWithTheBaselineBodies) {
  uint64_t seed = 1;
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (int64_t d : {1, 7, 8, 15, 16, 17, 100, 1000})
      for (auto [lo, hi] : {std::pair{-2, 2}, std::pair{-12, 12},
                            dt == DType::f16 ? std::pair{-22, 14} : std::pair{-40, 40}})
        check_baseline(dt, d, lo, hi, seed++);
}

// The 16-bit kernels against the f32 kernel on the same values (see the header comment).
void check_round_once(DType dt, int64_t d, int lo, int hi, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " d=" + std::to_string(d) + " exponents " + std::to_string(lo) + ".." +
               std::to_string(hi));
  const int64_t rows = 5, n = rows * d;
  const std::vector<char> x16 = random_rows(dt, rows, d, lo, hi, 3.0, seed);
  const std::vector<char> dy16 = random_rows(dt, rows, d, lo, hi, 0.0, seed + 1);
  const size_t nn = static_cast<size_t>(n);
  std::vector<float> x32(nn), dy32(nn);
  convert_elements(x16.data(), dt, x32.data(), DType::f32, n);
  convert_elements(dy16.data(), dt, dy32.data(), DType::f32, n);
  std::mt19937_64 rng(seed + 2);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const size_t nd = static_cast<size_t>(d);
  std::vector<double> w(nd), b(nd);
  for (size_t j = 0; j < nd; ++j) {
    w[j] = 1.0 + 0.5 * u(rng);
    b[j] = u(rng);
  }
  std::vector<uint16_t> y16(nn), dx16(nn);
  std::vector<float> y32(nn), dx32(nn);
  std::vector<double> dw16(nd), db16(nd), dw32(nd), db32(nd);
  ln::Scratch s;
  for (int64_t r = 0; r < rows; ++r) {
    double m16 = 0, r16 = 0, m32 = 0, r32 = 0;
    ln::forward_row(x16.data(), dt, r, d, w.data(), b.data(), 1e-5, y16.data(), m16, r16, s);
    ln::forward_row(x32.data(), DType::f32, r, d, w.data(), b.data(), 1e-5, y32.data(), m32, r32, s);
    ASSERT_EQ(m16, m32) << "row " << r;
    ASSERT_EQ(r16, r32) << "row " << r;
    ln::backward_row(x16.data(), dt, dy16.data(), dt, r, d, w.data(), m16, r16, dx16.data(), dw16.data(),
                     db16.data(), s);
    ln::backward_row(x32.data(), DType::f32, dy32.data(), DType::f32, r, d, w.data(), m32, r32, dx32.data(),
                     dw32.data(), db32.data(), s);
  }
  EXPECT_EQ(dw16, dw32);
  EXPECT_EQ(db16, db32);
  for (int out = 0; out < 2; ++out) {
    const std::vector<float>& v32 = out == 0 ? y32 : dx32;
    const std::vector<uint16_t>& v16 = out == 0 ? y16 : dx16;
    std::vector<uint16_t> want(nn);
    convert_elements(v32.data(), DType::f32, want.data(), dt, n);
    for (int64_t i = 0; i < n; ++i) {
      if (v16[size_t(i)] == want[size_t(i)]) continue;
      // Allowed only where the f32 value is a midpoint between two 16-bit neighbours.
      const double got = load_as_double(v16.data(), dt, i), near = load_as_double(want.data(), dt, i);
      const double f = v32[size_t(i)];
      ASSERT_TRUE(std::fabs(got - near) <= ulp_of(dt, std::max(std::fabs(got), std::fabs(near))) &&
                  f == 0.5 * (got + near))
          << (out == 0 ? "y" : "dx") << " element " << i << ": " << got << ", f32 " << f << " rounds to " << near;
    }
  }
}

TEST(LayerNormRowKernels, RoundsOnceAsConvertDoes) {
  uint64_t seed = 100;
  for (DType dt : {DType::bf16, DType::f16})
    for (int64_t d : {1, 7, 8, 15, 16, 17, 100, 1000})
      for (auto [lo, hi] : {std::pair{-2, 2}, std::pair{-12, 12},
                            dt == DType::f16 ? std::pair{-22, 14} : std::pair{-40, 40}})
        check_round_once(dt, d, lo, hi, seed++);
}

// Outputs just above a 16-bit midpoint whose f32 rounding is the midpoint itself: rounding
// through f32 to nearest would tie to even (down), the one rounding from double (round-to-odd
// f32 first) goes up. Rows [a, -a] with eps 0 have xhat = +-1 exactly, so y = +-w + b.
TEST(LayerNormRowKernels, RoundsOnceAtMidpoints) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const int p = dt == DType::bf16 ? 8 : 11;
    const int64_t d = 2;
    const double xs[2] = {0.5, -0.5};
    std::vector<char> x(4), y(4);
    convert_elements(xs, DType::f64, x.data(), dt, d);
    const double mid = 1.0 + std::ldexp(1.0, -p);  // between 1 and 1 + 2^(1-p), ties to 1
    const double w[2] = {mid + std::ldexp(1.0, -30), mid - std::ldexp(1.0, -30)}, b[2] = {0.0, 0.0};
    ln::Scratch s;
    double mean, rstd;
    ln::forward_row(x.data(), dt, 0, d, w, b, 0.0, y.data(), mean, rstd, s);
    ASSERT_EQ(rstd, 2.0);
    EXPECT_EQ(load_as_double(y.data(), dt, 0), 1.0 + std::ldexp(1.0, 1 - p)) << dtype_name(dt);  // up
    EXPECT_EQ(load_as_double(y.data(), dt, 1), -1.0) << dtype_name(dt);  // -(mid - tiny): down to -1
  }
}

// A row holding inf or NaN gives NaN statistics and NaN outputs on both routes.
TEST(LayerNormRowKernels, NonFiniteRowsLikeTheBaseline) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const int64_t d = 19;
    std::vector<double> v(static_cast<size_t>(d), 1.5);
    v[3] = INFINITY;
    std::vector<char> x(size_t(d) * 2), yf(size_t(d) * 2), yb(size_t(d) * 2);
    convert_elements(v.data(), DType::f64, x.data(), dt, d);
    const std::vector<double> w(static_cast<size_t>(d), 1.0), b(static_cast<size_t>(d), 0.0);
    ln::Scratch s;
    double mf, rf, mb, rb;
    ln::forward_row(x.data(), dt, 0, d, w.data(), b.data(), 1e-5, yf.data(), mf, rf, s);
    ln::forward_row_baseline(x.data(), dt, 0, d, w.data(), b.data(), 1e-5, yb.data(), mb, rb, s);
    for (int64_t j = 0; j < d; ++j) {
      EXPECT_TRUE(std::isnan(load_as_double(yf.data(), dt, j))) << j;
      EXPECT_TRUE(std::isnan(load_as_double(yb.data(), dt, j))) << j;
    }
  }
}

}  // namespace
}  // namespace mixprec
