// norm_test.cpp: layer_norm and batch_norm forward values against hand-computed numbers and
// float64 math, channels-last bit-identity, and mixed dtypes outside autocast.
#include "mixprec/ops/ops.h"

#include <gtest/gtest.h>

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

// ---- layer_norm ----

TEST(LayerNorm, RowOfOneToFourByHand) {
  // mean 2.5, biased var 1.25: y = (x - 2.5) / sqrt(1.25) with eps 0.
  const Tensor y = layer_norm(f64({1, 2, 3, 4}, {1, 4}), {4}, Tensor(), Tensor(), 0.0);
  expect_all_near(
      y, {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738},
      1e-15 /* f64 math, a few roundings */);
}

TEST(LayerNorm, AffineRowsMatchVectorMath) {
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

TEST(LayerNorm, OverLastTwoDimsUsesAllOfThem) {
  // Normalising [2, 2] together: the 4 values 1..4 share one mean, unlike per-row.
  const Tensor y = layer_norm(f64({1, 2, 3, 4}, {1, 2, 2}), {2, 2}, Tensor(), Tensor(), 0.0);
  expect_all_near(
      y, {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738}, 1e-15);
}

TEST(LayerNorm, F32InputMatchesF64Reference) {
  const std::vector<double> x = {100.0, 100.5, 99.5, 101.0};  // large mean, small spread
  const Tensor y = layer_norm(Tensor::from_vector_f64(x, {1, 4}, DType::f32), {4});
  const Tensor ref = layer_norm(f64(x, {1, 4}), {4});
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_all_near(y, ref.to_vector_f64(), 1e-6 /* one f32 rounding of values ~1 */);
}

// ---- batch_norm ----

// Channel 0 holds 1..6, channel 1 holds 10, 20, ..., 60: x [N=2, C=2, H=1, W=3].
const std::vector<double> kBnInput = {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60};

TEST(BatchNorm, TrainingNormalisesWithBatchStatsAndUpdatesRunningStats) {
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

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
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

TEST(BatchNorm, ChannelsLastInputGivesTheSameValuesAndKeepsItsLayout) {
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

// Training-mode batch_norm of base, contiguous and channels-last, forward and backward (with
// upstream gradient up): the same bits. Returns the contiguous output.
Tensor expect_layouts_bit_identical(const Tensor& base, const Tensor& w, const Tensor& b, const Tensor& up) {
  Tensor xc = base.clone().requires_grad_(true);
  Tensor xl = base.to_memory_format(MemoryFormat::channels_last).requires_grad_(true);
  EXPECT_FALSE(xl.is_contiguous());
  const Tensor yc = batch_norm(xc, Tensor(), Tensor(), w, b, true);
  const Tensor yl = batch_norm(xl, Tensor(), Tensor(), w, b, true);
  EXPECT_TRUE(bits_equal(yc, yl));
  yc.backward(up);
  yl.backward(up);
  EXPECT_TRUE(bits_equal(xc.grad(), xl.grad()));
  return yc;
}

TEST(BatchNorm, ChannelsLastForwardAndBackwardAreBitIdenticalToContiguous) {
  // Both layouts add each channel's values in the same (n, h, w) order.
  expect_layouts_bit_identical(Tensor::uniform({3, 5, 4, 3}, -2, 2), Tensor::uniform({5}, 0.5, 1.5),
                               Tensor::uniform({5}, -1, 1), Tensor::uniform({3, 5, 4, 3}, -1, 1));
}

TEST(BatchNorm, LargeRunsAreBitIdenticalAcrossLayoutsAndMatchFloat64) {
  // Runs of 1056 values (the vector path's head, 32-lane blocks and tail), more elements than
  // the parallel threshold, f32 and bf16: the contiguous kernel (AVX-512 where present) and
  // the channels-last row kernel add every channel's values in the same lanes and order.
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor base = Tensor::uniform({4, 8, 32, 33}, -3, 5).to(dt);
    const Tensor w = Tensor::uniform({8}, 0.5, 1.5), b = Tensor::uniform({8}, -1, 1);
    const Tensor yc = expect_layouts_bit_identical(base, w, b, Tensor::uniform({4, 8, 32, 33}, -1, 1).to(dt));
    // Against the same normalisation computed in float64 from the stored values.
    const Tensor y64 = batch_norm(base.to(DType::f64), Tensor(), Tensor(), w.to(DType::f64), b.to(DType::f64), true);
    const std::vector<double> got = yc.to_vector_f64(), want = y64.to_vector_f64();
    const double tol = dt == DType::bf16 ? 1.0 / 64 : 1e-5;  // one rounding to dt of values up to ~3
    for (size_t i = 0; i < got.size(); i += 97) ASSERT_NEAR(got[i], want[i], tol) << i;
  }
}

TEST(BatchNorm, MixedBf16InputWithF32ParamsOutsideAutocastOutputsBf16) {
  // O2: a bf16 activation through an f32 normalisation layer, autocast off.
  const Tensor x = Tensor::from_vector_f64(kBnInput, {2, 2, 1, 3}, DType::bf16);
  const Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor::ones({2}), Tensor::zeros({2}), true);
  EXPECT_EQ(y.dtype(), DType::bf16);
  const double s0 = std::sqrt(17.5 / 6.0 + 1e-5);
  EXPECT_NEAR(y.at(0), -2.5 / s0, 1.5 / 256 /* one bf16 rounding of a value ~1.5 */);
}

}  // namespace
}  // namespace mixprec
