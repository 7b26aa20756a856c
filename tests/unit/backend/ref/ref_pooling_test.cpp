// ref_pooling_test.cpp: backend/ref max/avg pooling against hand-computed windows (ties,
// NaN, padding, count_include_pad), backward against central differences, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "backend/kernels.h"
#include "common/finite_diff.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using backend::Pool2dParams;
using test::values_near;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Pool2dParams pool(int64_t k, int64_t s, int64_t pad) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  return p;
}

Tensor one_to_nine() {
  return Tensor::from_vector_f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
}

TEST(RefMaxPool, TiesPickTheFirstMaximum) {
  // Windows (row-major scan): {1,3,3,0} -> 3 at index 1; {2,2,2,1} -> index 2;
  // {5,5,5,4} -> index 8; {-1,-2,-3,-1} -> index 10.
  Tensor src = Tensor::from_vector_f64(
      {1, 3, 2, 2, 3, 0, 2, 1, 5, 5, -1, -2, 5, 4, -3, -1}, {1, 1, 4, 4});
  backend::PoolResult r = ref::max_pool2d_forward(src, pool(2, 2, 0));
  EXPECT_EQ(r.dst.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(values_near(r.dst, {3, 2, 5, -1}, 0.0));
  ASSERT_EQ(r.workspace.dtype(), DType::i64);
  ASSERT_EQ(r.workspace.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(values_near(r.workspace, {1, 2, 8, 10}, 0.0));
}

TEST(RefMaxPool, NaNIsTheMaximumAndTheLastNaNWins) {
  // PyTorch's rule `val > max || isnan(val)`: window 1 has NaNs at flat 8 and 9 -> 9.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Tensor src = Tensor::from_vector_f64({1, kNaN, 5, 6, -kInf, -kInf, 2, 3, kNaN, kNaN, -kInf,
                                        -kInf},
                                       {1, 1, 2, 6});
  backend::PoolResult r = ref::max_pool2d_forward(src, pool(2, 2, 0));
  EXPECT_TRUE(values_near(r.dst, {kNaN, kNaN, -kInf}, 0.0));
  // An all -inf window reports its first cell (flat 4), as PyTorch does.
  EXPECT_TRUE(values_near(r.workspace, {1, 9, 4}, 0.0));
}

TEST(RefMaxPool, PaddingNeverWins) {
  // 3x3, stride 1, pad 1 over 1..9: each output is its neighbourhood's bottom-right cell.
  backend::PoolResult r = ref::max_pool2d_forward(one_to_nine(), pool(3, 1, 1));
  EXPECT_TRUE(values_near(r.dst, {5, 6, 6, 8, 9, 9, 8, 9, 9}, 0.0));
  EXPECT_TRUE(values_near(r.workspace, {4, 5, 5, 7, 8, 8, 7, 8, 8}, 0.0));
  // Negative inputs: zero padding would win; -inf padding does not.
  std::vector<double> neg(9);
  for (int i = 0; i < 9; ++i) neg[i] = -(i + 1.0);
  r = ref::max_pool2d_forward(Tensor::from_vector_f64(neg, {1, 1, 3, 3}), pool(3, 2, 1));
  EXPECT_TRUE(values_near(r.dst, {-1, -2, -4, -5}, 0.0));
}

TEST(RefMaxPool, BackwardScatterAddsOverlappingWindows) {
  // The four 2x2 stride-1 windows of a 3x3 plane all contain the centre; with the centre
  // the largest, all pick it and it receives the sum 1 + 2 + 3 + 4.
  Tensor src = Tensor::from_vector_f64({1, 2, 3, 4, 10, 6, 7, 8, 9}, {1, 1, 3, 3});
  backend::PoolResult r = ref::max_pool2d_forward(src, pool(2, 1, 0));
  Tensor diff_dst = Tensor::from_vector_f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor diff_src = ref::max_pool2d_backward(diff_dst, r.workspace, src.shape(), pool(2, 1, 0));
  EXPECT_TRUE(values_near(diff_src, {0, 0, 0, 0, 10, 0, 0, 0, 0}, 0.0));
}

// Distinct inputs 0.01 apart (a shuffled ramp) keep every argmax stable under +-1e-6, so
// max pooling is locally linear there and the difference carries only roundoff.
Tensor shuffled_ramp(const Shape& shape, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (double& x : v) x *= 0.01;
  return Tensor::from_vector_f64(v, shape);
}

TEST(RefMaxPool, BackwardMatchesFiniteDifferences) {
  for (const Pool2dParams& p : {pool(3, 2, 1), pool(2, 2, 0), pool(2, 1, 1)}) {
    Tensor src = shuffled_ramp({2, 2, 5, 5}, 7);
    backend::PoolResult r = ref::max_pool2d_forward(src, p);
    const Tensor diff_dst = test::random_tensor(r.dst.shape(), 8);
    test::ScalarFn f = [&](std::vector<Tensor>& in) {
      return test::dot_f64(diff_dst, ref::max_pool2d_forward(in[0], p).dst);
    };
    std::vector<Tensor> inputs{src};
    Tensor diff_src = ref::max_pool2d_backward(diff_dst, r.workspace, src.shape(), p);
    EXPECT_TRUE(test::gradients_match(diff_src, test::numerical_gradient(f, inputs, 0), 1e-6))
        << "kernel " << p.kernel_h << " stride " << p.stride_h << " pad " << p.pad_h;
  }
}

TEST(RefAvgPool, CountIncludePadDividesByTheFullWindow) {
  // 3x3, stride 1, pad 1 over 1..9: corner sums 12, 16, 24, 28, edges 21, 27, 33, 39,
  // centre 45, all over 9 (padded cells count). 1e-15: one division's rounding.
  Tensor dst = ref::avg_pool2d_forward(one_to_nine(), pool(3, 1, 1));
  EXPECT_TRUE(values_near(dst,
                          {12 / 9.0, 21 / 9.0, 16 / 9.0, 27 / 9.0, 45 / 9.0, 33 / 9.0, 24 / 9.0,
                           39 / 9.0, 28 / 9.0},
                          1e-15));
  // No padding: plain 2x2 means of a 4x4 ramp 0..15.
  std::vector<double> ramp(16);
  std::iota(ramp.begin(), ramp.end(), 0.0);
  Tensor src = Tensor::from_vector_f64(ramp, {1, 1, 4, 4}, DType::f32);
  dst = ref::avg_pool2d_forward(src, pool(2, 2, 0));
  EXPECT_EQ(dst.dtype(), DType::f32);
  EXPECT_TRUE(values_near(dst, {2.5, 4.5, 10.5, 12.5}, 0.0));
}

TEST(RefAvgPool, BackwardMatchesFiniteDifferences) {
  // Average pooling is linear: differences carry only roundoff, rtol 1e-6 is generous.
  Pool2dParams rect;
  rect.kernel_h = 2;
  rect.kernel_w = 3;
  rect.stride_h = 1;
  rect.stride_w = 2;
  rect.pad_h = 1;
  rect.pad_w = 0;
  for (const Pool2dParams& p : {pool(3, 2, 1), rect}) {
    Tensor src = test::random_tensor({2, 2, 5, 5}, 9);
    const Tensor diff_dst = test::random_tensor(ref::avg_pool2d_forward(src, p).shape(), 10);
    test::ScalarFn f = [&](std::vector<Tensor>& in) {
      return test::dot_f64(diff_dst, ref::avg_pool2d_forward(in[0], p));
    };
    std::vector<Tensor> inputs{src};
    Tensor diff_src = ref::avg_pool2d_backward(diff_dst, src.shape(), p);
    EXPECT_TRUE(test::gradients_match(diff_src, test::numerical_gradient(f, inputs, 0), 1e-6))
        << "kernel " << p.kernel_h << "x" << p.kernel_w;
  }
}

TEST(RefPool, ErrorsNameTheOpAndShapes) {
  std::string msg = test::invalid_argument_message(
      [] { ref::max_pool2d_forward(Tensor::zeros({1, 1, 4, 4}), pool(2, 2, 2)); });
  EXPECT_NE(msg.find("max_pool2d: pad (2, 2) must be >= 0 and at most half of kernel (2, 2)"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message(
      [] { ref::avg_pool2d_forward(Tensor::zeros({4, 4}), pool(2, 2, 0)); });
  EXPECT_NE(msg.find("avg_pool2d: src [4, 4] must be 4-D"), std::string::npos) << msg;
  msg = test::invalid_argument_message(
      [] { ref::avg_pool2d_backward(Tensor::zeros({1, 1, 3, 3}), {1, 1, 4, 4}, pool(2, 2, 0)); });
  EXPECT_NE(msg.find("avg_pool2d_backward: diff_dst [1, 1, 3, 3] must be [1, 1, 2, 2] for src "
                     "[1, 1, 4, 4]"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message([] {
    ref::max_pool2d_backward(Tensor::zeros({1, 1, 2, 2}), Tensor::zeros({1, 1, 2, 2}),
                             {1, 1, 4, 4}, pool(2, 2, 0));
  });
  EXPECT_NE(msg.find("max_pool2d_backward: workspace"), std::string::npos) << msg;
  msg = test::invalid_argument_message(
      [] { ref::max_pool2d_forward(Tensor::zeros({1, 1, 2, 2}), pool(3, 1, 0)); });
  EXPECT_NE(msg.find("max_pool2d: src [1, 1, 2, 2]: kernel (3, 3) does not fit"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace mixprec
