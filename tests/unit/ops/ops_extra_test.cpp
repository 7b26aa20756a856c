// ops_extra_test.cpp: forward values of layer_norm, batch_norm, gelu, dropout, pow, cat and
// stack against hand-computed numbers; their autocast dtypes (and bit-identity with a manual
// cast); error messages; and the LayerNorm / BatchNorm2d / GELU / Dropout modules.
#include "mixprec/ops_extra.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "mixprec/amp.h"
#include "mixprec/autograd.h"
#include "mixprec/nn_extra.h"
#include "mixprec/ops.h"

namespace mixprec {
namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector_f64(v, s); }

// Same dtype, shape and bytes (compares the contiguous buffers).
::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  if (std::memcmp(ca.data(), cb.data(), size_t(a.numel()) * dtype_size(a.dtype())) != 0)
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

// The message of the Error fn throws ("" if none).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_all_near(const Tensor& t, const std::vector<double>& expected, double tol) {
  const std::vector<double> v = t.to_vector_f64();
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], tol) << "element " << i;
}

// ---- layer_norm ----

TEST(OpsExtraLayerNorm, RowOfOneToFourByHand) {
  // mean 2.5, biased var 1.25: y = (x - 2.5) / sqrt(1.25) with eps 0.
  const Tensor y = layer_norm(f64({1, 2, 3, 4}, {1, 4}), {4}, Tensor(), Tensor(), 0.0);
  expect_all_near(
      y, {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738},
      1e-15 /* f64 math, a few roundings */);
}

TEST(OpsExtraLayerNorm, AffineRowsMatchVectorMath) {
  const std::vector<double> x = {0.5, -1.0, 2.0, 3.5, 1.0, 1.0, 1.5, -2.0, 0.0, 4.0, -3.0, 0.25};
  const std::vector<double> w = {1.5, -0.5, 2.0}, b = {0.1, 0.2, -0.3};
  const double eps = 1e-5;
  const Tensor y = layer_norm(f64(x, {2, 2, 3}), {3}, f64(w, {3}), f64(b, {3}), eps);
  std::vector<double> expected;
  for (size_t r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < 3; ++j) mean += x[r * 3 + j] / 3.0;
    for (size_t j = 0; j < 3; ++j) var += (x[r * 3 + j] - mean) * (x[r * 3 + j] - mean) / 3.0;
    for (size_t j = 0; j < 3; ++j)
      expected.push_back((x[r * 3 + j] - mean) / std::sqrt(var + eps) * w[j] + b[j]);
  }
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  expect_all_near(y, expected, 1e-13);
}

TEST(OpsExtraLayerNorm, OverLastTwoDimsUsesAllOfThem) {
  // Normalising [2, 2] together: the 4 values 1..4 share one mean, unlike per-row.
  const Tensor y = layer_norm(f64({1, 2, 3, 4}, {1, 2, 2}), {2, 2}, Tensor(), Tensor(), 0.0);
  expect_all_near(
      y, {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738}, 1e-15);
}

TEST(OpsExtraLayerNorm, F32InputMatchesF64Reference) {
  const std::vector<double> x = {100.0, 100.5, 99.5, 101.0};  // large mean, small spread
  const Tensor y = layer_norm(Tensor::from_vector_f64(x, {1, 4}, DType::f32), {4});
  const Tensor ref = layer_norm(f64(x, {1, 4}), {4});
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_all_near(y, ref.to_vector_f64(), 1e-6 /* one f32 rounding of values ~1 */);
}

// ---- batch_norm ----

// Channel 0 holds 1..6, channel 1 holds 10, 20, ..., 60: x [N=2, C=2, H=1, W=3].
const std::vector<double> kBnInput = {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60};

TEST(OpsExtraBatchNorm, TrainingNormalisesWithBatchStatsAndUpdatesRunningStats) {
  Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
  const Tensor y =
      batch_norm(f64(kBnInput, {2, 2, 1, 3}), rm, rv, Tensor(), Tensor(), true, 0.1, 0.0);
  // Channel 0: mean 3.5, biased var 17.5 / 6, unbiased var 3.5.
  // Channel 1: mean 35, biased var 1750 / 6, unbiased var 350.
  const double s0 = std::sqrt(17.5 / 6.0), s1 = std::sqrt(1750.0 / 6.0);
  expect_all_near(y,
                  {-2.5 / s0, -1.5 / s0, -0.5 / s0, -25 / s1, -15 / s1, -5 / s1, 0.5 / s0, 1.5 / s0,
                   2.5 / s0, 5 / s1, 15 / s1, 25 / s1},
                  1e-14);
  // PyTorch: running = 0.9 * running + 0.1 * stat, with the unbiased variance.
  expect_all_near(rm, {0.35, 3.5}, 1e-6 /* f32 buffers */);
  expect_all_near(rv, {0.9 + 0.35, 0.9 + 35.0}, 1e-5 /* f32 buffers */);
  EXPECT_EQ(rm.dtype(), DType::f32);
}

TEST(OpsExtraBatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  Tensor rm = Tensor::from_vector_f64({1.0, -2.0}, {2}, DType::f32);
  Tensor rv = Tensor::from_vector_f64({4.0, 0.25}, {2}, DType::f32);
  const Tensor w = f64({2.0, 3.0}, {2}), b = f64({0.5, -1.0}, {2});
  const Tensor y = batch_norm(f64({3, 5, 0, -1.5}, {2, 2}), rm, rv, w, b, false, 0.1, 0.0);
  // y = (x - rm) / sqrt(rv) * w + b per channel (column).
  expect_all_near(y,
                  {(3 - 1) / 2.0 * 2 + 0.5, (5 + 2) / 0.5 * 3 - 1, (0 - 1) / 2.0 * 2 + 0.5,
                   (-1.5 + 2) / 0.5 * 3 - 1},
                  1e-14);
  expect_all_near(rm, {1.0, -2.0}, 0.0);
  expect_all_near(rv, {4.0, 0.25}, 0.0);
}

TEST(OpsExtraBatchNorm, ChannelsLastInputGivesTheSameValuesAndKeepsItsLayout) {
  const Tensor x = f64(kBnInput, {2, 2, 1, 3}).to_memory_format(MemoryFormat::channels_last);
  ASSERT_TRUE(x.is_channels_last() && !x.is_contiguous());
  const Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 0.0);
  EXPECT_TRUE(y.is_channels_last());
  const double s0 = std::sqrt(17.5 / 6.0), s1 = std::sqrt(1750.0 / 6.0);
  expect_all_near(y,  // logical (NCHW) order
                  {-2.5 / s0, -1.5 / s0, -0.5 / s0, -25 / s1, -15 / s1, -5 / s1, 0.5 / s0, 1.5 / s0,
                   2.5 / s0, 5 / s1, 15 / s1, 25 / s1},
                  1e-14);
}

TEST(OpsExtraBatchNorm, ChannelsLastForwardAndBackwardAreBitIdenticalToContiguous) {
  // Both layouts add each channel's values in the same (n, h, w) order.
  const Tensor base = Tensor::uniform({3, 5, 4, 3}, -2, 2);
  const Tensor w = Tensor::uniform({5}, 0.5, 1.5), b = Tensor::uniform({5}, -1, 1);
  const Tensor up = Tensor::uniform({3, 5, 4, 3}, -1, 1);
  Tensor xc = base.clone().requires_grad_(true);
  Tensor xl = base.to_memory_format(MemoryFormat::channels_last).requires_grad_(true);
  ASSERT_FALSE(xl.is_contiguous());
  const Tensor yc = batch_norm(xc, Tensor(), Tensor(), w, b, true);
  const Tensor yl = batch_norm(xl, Tensor(), Tensor(), w, b, true);
  EXPECT_TRUE(bits_equal(yc, yl));
  yc.backward(up);
  yl.backward(up);
  EXPECT_TRUE(bits_equal(xc.grad(), xl.grad()));
}

TEST(OpsExtraBatchNorm, MixedBf16InputWithF32ParamsOutsideAutocastOutputsBf16) {
  // O2: a bf16 activation through an f32 normalisation layer, autocast off.
  const Tensor x = Tensor::from_vector_f64(kBnInput, {2, 2, 1, 3}, DType::bf16);
  const Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor::ones({2}), Tensor::zeros({2}), true);
  EXPECT_EQ(y.dtype(), DType::bf16);
  const double s0 = std::sqrt(17.5 / 6.0 + 1e-5);
  EXPECT_NEAR(y.at(0), -2.5 / s0, 1.5 / 256 /* one bf16 rounding of a value ~1.5 */);
}

// ---- gelu, dropout, pow ----

TEST(OpsExtraActivation, GeluMatchesTabulatedValues) {
  // x * Phi(x): Phi(1) = 0.841344746068543, Phi(2) = 0.977249868051821, Phi(-1) = 1 - Phi(1).
  const Tensor y = gelu(f64({0.0, 1.0, -1.0, 2.0}, {4}));
  expect_all_near(y, {0.0, 0.841344746068543, -0.158655253931457, 1.954499736103642}, 1e-14);
}

TEST(OpsExtraActivation, GeluF32AndBf16MatchF64ForwardAndBackward) {
  // 4001 points on [-10, 10] (both tails, where 1 + erf cancels) plus a tail beyond the
  // vector width, through the f32/bf16 path and the f64 one (libm erf in double).
  std::vector<double> xs;
  for (int i = 0; i <= 4000; ++i) xs.push_back(-10.0 + 0.005 * i);
  const Tensor x64 = f64(xs, {int64_t(xs.size())});
  const Tensor g64 = Tensor::full(x64.shape(), 0.75, DType::f64);  // exact in bf16
  for (DType dt : {DType::f32, DType::bf16}) {
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
    // bf16: one rounding of the output (2^-8 relative).
    const double rel = dt == DType::f32 ? 2e-7 : 1.0 / 128;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double r = rel * (4 + xv[i] * xv[i]);
      ASSERT_NEAR(yv[i], yr[i], r * std::fabs(yr[i]) + 1e-14) << "x = " << xv[i];
      ASSERT_NEAR(dv[i], dr[i], r * 0.9 + 1e-14) << "x = " << xv[i];
    }
  }
}

TEST(OpsExtraActivation, DropoutIsIdentityInEvalOrWithZeroP) {
  const Tensor x = f64({1, 2, 3}, {3});
  EXPECT_TRUE(dropout(x, 0.5, false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).same(x));
}

TEST(OpsExtraActivation, DropoutDropsAboutPAndScalesKeptValues) {
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

TEST(OpsExtraActivation, DropoutMaskFollowsManualSeed) {
  manual_seed(5);
  const Tensor a = dropout(Tensor::ones({64}), 0.5, true);
  const Tensor b = dropout(Tensor::ones({64}), 0.5, true);
  manual_seed(5);
  const Tensor c = dropout(Tensor::ones({64}), 0.5, true);
  EXPECT_TRUE(bits_equal(a, c));
  EXPECT_FALSE(bits_equal(a, b));  // the generator advanced
}

TEST(OpsExtraActivation, PowMatchesHandValues) {
  expect_all_near(pow(f64({2, -3, 0.5}, {3}), 2.0), {4, 9, 0.25}, 0.0);
  expect_all_near(pow(f64({4, 9, 0.25}, {3}), 0.5), {2, 3, 0.5}, 0.0);
  expect_all_near(pow(f64({2, -4, 0.5}, {3}), -1.0), {0.5, -0.25, 2}, 0.0);
  expect_all_near(pow(f64({2, -3}, {2}), 3.0), {8, -27}, 0.0);
}

// ---- cat and stack ----

TEST(OpsExtraConcat, CatAlongEachDim) {
  const Tensor a = f64({1, 2, 3, 4}, {2, 2}), b = f64({5, 6}, {2, 1}), c = f64({7, 8}, {1, 2});
  const Tensor d1 = cat({a, b}, 1);
  EXPECT_EQ(d1.shape(), (Shape{2, 3}));
  expect_all_near(d1, {1, 2, 5, 3, 4, 6}, 0.0);
  const Tensor d0 = cat({a, c}, 0);
  EXPECT_EQ(d0.shape(), (Shape{3, 2}));
  expect_all_near(d0, {1, 2, 3, 4, 7, 8}, 0.0);
  expect_all_near(cat({a, b, b}, -1), {1, 2, 5, 5, 3, 4, 6, 6}, 0.0);
  expect_all_near(cat({a}, 0), {1, 2, 3, 4}, 0.0);
}

TEST(OpsExtraConcat, CatOfChannelsLastInputsUsesLogicalOrder) {
  std::vector<double> av(8), bv(16);
  for (size_t i = 0; i < av.size(); ++i) av[i] = double(i + 1);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = double(i + 101);
  const Tensor a = f64(av, {2, 1, 2, 2});
  const Tensor b = f64(bv, {2, 2, 2, 2}).to_memory_format(MemoryFormat::channels_last);
  ASSERT_FALSE(b.is_contiguous());
  const Tensor y = cat({a, b}, 1);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2, 2}));
  // Per image n: a's channel (4 values), then b's two channels (8 values), in NCHW order.
  std::vector<double> expected;
  for (size_t n = 0; n < 2; ++n) {
    for (size_t i = 0; i < 4; ++i) expected.push_back(av[n * 4 + i]);
    for (size_t i = 0; i < 8; ++i) expected.push_back(bv[n * 8 + i]);
  }
  expect_all_near(y, expected, 0.0);
}

TEST(OpsExtraConcat, StackAddsADim) {
  const Tensor a = f64({1, 2, 3}, {3}), b = f64({4, 5, 6}, {3});
  const Tensor s0 = stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  expect_all_near(s0, {1, 2, 3, 4, 5, 6}, 0.0);
  const Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  expect_all_near(s1, {1, 4, 2, 5, 3, 6}, 0.0);
  EXPECT_EQ(stack({a, b}, -1).shape(), (Shape{3, 2}));
  EXPECT_EQ(stack({a, b, a}, -2).shape(), (Shape{3, 3}));
}

TEST(OpsExtraConcat, MixedDtypesWithoutAutocastGoToTheCommonDtype) {
  const Tensor a = Tensor::from_vector({1.5f}, {1}, DType::bf16),
               b = Tensor::from_vector({2.25f}, {1});
  const Tensor y = cat({a, b}, 0);
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_all_near(y, {1.5, 2.25}, 0.0);
  EXPECT_EQ(stack({a, Tensor::from_vector({1.f}, {1}, DType::f16)}, 0).dtype(), DType::f32);
}

// ---- autocast ----

TEST(OpsExtraAutocast, LayerNormReturnsF32AndMatchesAManualCast) {
  const Tensor x = Tensor::uniform({4, 6}, -2, 2, DType::bf16);
  const Tensor w = Tensor::uniform({6}, 0.5, 1.5), b = Tensor::uniform({6}, -1, 1);
  Tensor ln;
  {
    amp::AutocastGuard g(DType::bf16);
    ln = layer_norm(x, {6}, w, b);
  }
  EXPECT_EQ(ln.dtype(), DType::f32);
  EXPECT_TRUE(bits_equal(ln, layer_norm(x.to(DType::f32), {6}, w, b)));
}

// batch_norm and pow keep a bf16 input's dtype under autocast, as PyTorch's CPU autocast
// does (docs/amp.md): the same bits as without autocast, running stats updated the same.
TEST(OpsExtraAutocast, BatchNormAndPowKeepBf16AsPyTorch) {
  const Tensor x = Tensor::uniform({4, 6}, -2, 2, DType::bf16);
  const Tensor x4 = Tensor::uniform({2, 3, 2, 2}, -2, 2, DType::bf16);
  const Tensor bw = Tensor::uniform({3}, 0.5, 1.5), bb = Tensor::uniform({3}, -1, 1);
  Tensor rm_auto = Tensor::zeros({3}), rv_auto = Tensor::ones({3});
  Tensor rm_ref = Tensor::zeros({3}), rv_ref = Tensor::ones({3});
  Tensor bn, pw;
  {
    amp::AutocastGuard g(DType::bf16);
    bn = batch_norm(x4, rm_auto, rv_auto, bw, bb, true);
    pw = pow(x, 3.0);
  }
  EXPECT_EQ(bn.dtype(), DType::bf16);
  EXPECT_EQ(pw.dtype(), DType::bf16);
  EXPECT_TRUE(bits_equal(bn, batch_norm(x4, rm_ref, rv_ref, bw, bb, true)));
  EXPECT_TRUE(bits_equal(rm_auto, rm_ref));
  EXPECT_TRUE(bits_equal(rv_auto, rv_ref));
  EXPECT_TRUE(bits_equal(pw, pow(x, 3.0)));
  EXPECT_EQ(rm_auto.dtype(), DType::f32);
}

TEST(OpsExtraAutocast, KeepOpsStayInTheInputDtype) {
  const Tensor x = Tensor::uniform({5, 7}, -3, 3, DType::bf16);
  Tensor ge, dr;
  {
    amp::AutocastGuard g(DType::bf16);
    ge = gelu(x);
    manual_seed(11);
    dr = dropout(x, 0.4, true);
  }
  EXPECT_EQ(ge.dtype(), DType::bf16);
  EXPECT_EQ(dr.dtype(), DType::bf16);
  EXPECT_TRUE(bits_equal(ge, gelu(x)));
  manual_seed(11);
  EXPECT_TRUE(bits_equal(dr, dropout(x, 0.4, true)));
}

TEST(OpsExtraAutocast, CatAndStackPromoteToTheWidest) {
  const Tensor a = Tensor::uniform({2, 3}, -1, 1, DType::bf16), b = Tensor::uniform({2, 3}, -1, 1);
  const Tensor h = Tensor::uniform({2, 3}, -1, 1, DType::f16);
  Tensor c, s, hb;
  {
    amp::AutocastGuard g(DType::bf16);
    c = cat({a, b}, 0);
    s = stack({a, b}, 1);
    hb = cat({h, a}, 1);  // f16 with bf16: neither holds the other, so f32
  }
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_EQ(hb.dtype(), DType::f32);
  EXPECT_TRUE(bits_equal(c, cat({a.to(DType::f32), b}, 0)));
  EXPECT_TRUE(bits_equal(s, stack({a.to(DType::f32), b}, 1)));
}

TEST(OpsExtraAutocast, F64IsNeverCast) {
  const Tensor x = f64({1, 2, 3, 4}, {1, 4});
  amp::AutocastGuard g(DType::bf16);
  EXPECT_EQ(layer_norm(x, {4}).dtype(), DType::f64);
  EXPECT_EQ(pow(x, 2.0).dtype(), DType::f64);
  EXPECT_EQ(gelu(x).dtype(), DType::f64);
}

TEST(OpsExtraAutocast, BackwardReachesEachLeafInItsOwnDtype) {
  Tensor x = Tensor::uniform({3, 4}, -1, 1, DType::bf16).requires_grad_(true);
  Tensor w = Tensor::ones({4}).requires_grad_(true), b = Tensor::zeros({4}).requires_grad_(true);
  Tensor y;
  {
    amp::AutocastGuard g(DType::bf16);
    y = sum(mul(layer_norm(x, {4}, w, b), Tensor::uniform({3, 4}, -1, 1)));
  }
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
}

// ---- errors ----

TEST(OpsExtraErrors, ShapeErrorsNameTheOpAndShapes) {
  const Tensor x = Tensor::zeros({2, 3});
  std::string m = error_of([&] { layer_norm(x, {4}); });
  EXPECT_NE(m.find("layer_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  m = error_of([&] { layer_norm(x, {3}, Tensor::ones({2})); });
  EXPECT_NE(m.find("layer_norm: weight [2]"), std::string::npos) << m;
  m = error_of([&] { batch_norm(x, Tensor(), Tensor(), Tensor::ones({4}), Tensor(), true); });
  EXPECT_NE(m.find("batch_norm: weight [4]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  m = error_of(
      [&] { batch_norm(Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true); });
  EXPECT_NE(m.find("batch_norm"), std::string::npos) << m;
  m = error_of([&] {
    batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
  });
  EXPECT_NE(m.find("more than 1 value per channel"), std::string::npos) << m;
  m = error_of([&] { batch_norm(x, Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), false); });
  EXPECT_NE(m.find("running_var"), std::string::npos) << m;
  m = error_of([&] { cat({x, Tensor::zeros({3, 3})}, 1); });
  EXPECT_NE(m.find("cat: tensor 1 has shape [3, 3] but tensor 0 has [2, 3]"), std::string::npos)
      << m;
  m = error_of([&] { cat({x}, 2); });
  EXPECT_NE(m.find("cat: dim 2 out of range"), std::string::npos) << m;
  m = error_of([&] { cat({}, 0); });
  EXPECT_NE(m.find("cat"), std::string::npos) << m;
  m = error_of([&] { stack({x, Tensor::zeros({3, 2})}, 0); });
  EXPECT_NE(m.find("stack: tensor 1 has shape [3, 2] but tensor 0 has [2, 3]"), std::string::npos)
      << m;
  m = error_of([&] { stack({x}, 3); });
  EXPECT_NE(m.find("stack: dim 3 out of range"), std::string::npos) << m;
}

TEST(OpsExtraErrors, BadArgumentsAreRejected) {
  const Tensor i = Tensor::from_vector_i64({1, 2}, {2});
  EXPECT_NE(error_of([&] { pow(i, 2.0); }).find("pow: needs a floating tensor"), std::string::npos);
  EXPECT_NE(error_of([&] { gelu(i); }).find("gelu: needs a floating tensor"), std::string::npos);
  EXPECT_NE(error_of([&] { dropout(Tensor::ones({2}), 1.0); }).find("dropout: p must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dropout(Tensor::ones({2}), -0.1); }).find("dropout: p"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { layer_norm(Tensor::ones({2}), {2}, Tensor(), Tensor(), -1.0); }).find("eps"),
      std::string::npos);
}

// ---- modules ----

TEST(OpsExtraModules, LayerNormHasPyTorchDefaults) {
  nn::LayerNorm ln({4});
  const auto params = ln.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  expect_all_near(ln.weight, {1, 1, 1, 1}, 0.0);
  expect_all_near(ln.bias, {0, 0, 0, 0}, 0.0);
  EXPECT_TRUE(ln.weight.requires_grad());
  expect_all_near(ln(Tensor::from_vector({1, 2, 3, 4}, {1, 4})),
                  {-1.5 / std::sqrt(1.25 + 1e-5), -0.5 / std::sqrt(1.25 + 1e-5),
                   0.5 / std::sqrt(1.25 + 1e-5), 1.5 / std::sqrt(1.25 + 1e-5)},
                  1e-6 /* f32 output */);
  EXPECT_TRUE(nn::LayerNorm({4}, 1e-5, false).named_parameters().empty());
}

TEST(OpsExtraModules, BatchNorm2dTracksRunningStatsOnlyInTraining) {
  nn::BatchNorm2d bn(2);
  EXPECT_EQ(bn.named_parameters().size(), 2u);  // running stats are buffers, not parameters
  EXPECT_FALSE(bn.running_mean.requires_grad());
  const Tensor x = Tensor::from_vector_f64(kBnInput, {2, 2, 1, 3}, DType::f32);
  bn(x);
  expect_all_near(bn.running_mean, {0.35, 3.5}, 1e-6);
  expect_all_near(bn.running_var, {1.25, 35.9}, 1e-5);
  bn.eval();
  const Tensor y = bn(x);
  expect_all_near(bn.running_mean, {0.35, 3.5}, 1e-6);  // unchanged in eval
  EXPECT_NEAR(y.at(0), (1.0 - 0.35) / std::sqrt(1.25 + 1e-5), 1e-6);
  EXPECT_NE(error_of([&] {
              bn(Tensor::zeros({2, 3, 1, 1}));
            }).find("BatchNorm2d: input [2, 3, 1, 1]"),
            std::string::npos);
}

TEST(OpsExtraModules, DropoutAndGeluModules) {
  nn::Dropout d(0.5);
  const Tensor x = Tensor::ones({100});
  d.eval();
  EXPECT_TRUE(d(x).same(x));
  d.train();
  EXPECT_FALSE(bits_equal(d(x), x));
  nn::GELU g;
  EXPECT_NEAR(g(Tensor::from_vector({1.f}, {1})).item(), 0.841344746068543, 1e-7);
  EXPECT_NE(error_of([] { nn::Dropout bad(1.0); }).find("Dropout: p"), std::string::npos);
}

TEST(OpsExtraModules, NormalizationMarker) {
  nn::Sequential net{std::make_shared<nn::Conv2d>(1, 2, 3),
                     std::make_shared<nn::BatchNorm2d>(2),
                     std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::LayerNorm>(Shape{8}),
                     std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Dropout>(0.1)};
  std::vector<std::string> norms;
  for (const auto& [name, m] : net.named_modules())
    if (nn::is_normalization_layer(*m)) norms.push_back(name);
  EXPECT_EQ(norms, (std::vector<std::string>{"1", "4"}));
  EXPECT_FALSE(nn::is_normalization_layer(net));
}

}  // namespace
}  // namespace mixprec
