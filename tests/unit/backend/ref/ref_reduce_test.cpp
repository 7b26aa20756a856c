// ref_reduce_test.cpp: backend/ref reduce (sum/mean/max/min) over single and multiple
// axes with and without keepdim, NaN, empty reductions, strided input, and errors.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "backend/kernels.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using backend::ReduceOp;
using test::values_near;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor two_by_three() { return Tensor::from_vector_f64({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(RefReduce, SingleAxisKeepdim) {
  Tensor x = two_by_three();
  Tensor s0 = ref::reduce(ReduceOp::sum, x, {0}, false);
  EXPECT_EQ(s0.shape(), (Shape{3}));
  EXPECT_TRUE(values_near(s0, {5, 7, 9}, 0.0));
  Tensor s1 = ref::reduce(ReduceOp::sum, x, {1}, true);
  EXPECT_EQ(s1.shape(), (Shape{2, 1}));
  EXPECT_TRUE(values_near(s1, {6, 15}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::mean, x, {1}, false), {2, 5}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::max, x, {0}, false), {4, 5, 6}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::min, x, {1}, false), {1, 4}, 0.0));
}

TEST(RefReduce, AllAxes) {
  Tensor all = ref::reduce(ReduceOp::sum, two_by_three(), {0, 1}, false);
  EXPECT_EQ(all.shape(), Shape{});
  EXPECT_TRUE(values_near(all, {21}, 0.0));
  Tensor kept = ref::reduce(ReduceOp::mean, two_by_three(), {0, 1}, true);
  EXPECT_EQ(kept.shape(), (Shape{1, 1}));
  EXPECT_TRUE(values_near(kept, {3.5}, 0.0));
}

TEST(RefReduce, OuterAndInnerAxesOf3D) {
  // x[i][j][k] = 12i + 4j + k over [2, 3, 4]. Over axes {0, 2}:
  // sum = 8 * 4j + (0 + 12) * 4 + (0+1+2+3) * 2 = 60 + 32j; max = 12 + 4j + 3.
  std::vector<double> v(24);
  std::iota(v.begin(), v.end(), 0.0);
  Tensor x = Tensor::from_vector_f64(v, {2, 3, 4}, DType::f32);
  Tensor s = ref::reduce(ReduceOp::sum, x, {0, 2}, true);
  EXPECT_EQ(s.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_TRUE(values_near(s, {60, 92, 124}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::max, x, {0, 2}, false), {15, 19, 23}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::min, x, {0, 2}, false), {0, 4, 8}, 0.0));
  // Over the middle axis: sum_j (12i + 4j + k) = 36i + 12 + 3k, shape [2, 4].
  Tensor mid = ref::reduce(ReduceOp::sum, x, {1}, false);
  EXPECT_EQ(mid.shape(), (Shape{2, 4}));
  EXPECT_TRUE(values_near(mid, {12, 15, 18, 21, 48, 51, 54, 57}, 0.0));
}

TEST(RefReduce, ReadsTransposedView) {
  // The transpose of [[1, 2, 3], [4, 5, 6]] is [[1, 4], [2, 5], [3, 6]]: row sums 5, 7, 9.
  Tensor t = two_by_three().as_strided({3, 2}, {1, 3}, 0);
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::sum, t, {1}, false), {5, 7, 9}, 0.0));
}

TEST(RefReduce, MaxMinPropagateNaNInEitherPosition) {
  Tensor x = Tensor::from_vector_f64({1, kNaN, kNaN, 1, 3, 4}, {3, 2});
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::max, x, {1}, false), {kNaN, kNaN, 4}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::min, x, {1}, false), {kNaN, kNaN, 3}, 0.0));
}

TEST(RefReduce, EmptyAxesCopyAndEmptySets) {
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::sum, two_by_three(), {}, false),
                          {1, 2, 3, 4, 5, 6}, 0.0));
  // Reducing a size-0 axis: sum 0, mean 0/0 = NaN (PyTorch), max is an error.
  Tensor empty = Tensor::zeros({2, 0}, DType::f64);
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::sum, empty, {1}, false), {0, 0}, 0.0));
  EXPECT_TRUE(values_near(ref::reduce(ReduceOp::mean, empty, {1}, false), {kNaN, kNaN}, 0.0));
  std::string msg =
      test::invalid_argument_message([&] { ref::reduce(ReduceOp::max, empty, {1}, false); });
  EXPECT_NE(msg.find("reduce_max: axes [1] of src [2, 0] hold no elements"), std::string::npos)
      << msg;
}

TEST(RefReduce, ErrorsNameTheAxesAndShape) {
  std::string msg = test::invalid_argument_message(
      [] { ref::reduce(ReduceOp::sum, Tensor::zeros({2, 3}), {1, 0}, false); });
  EXPECT_NE(msg.find("reduce_sum: axes [1, 0] for src [2, 3] must be sorted"), std::string::npos)
      << msg;
  msg = test::invalid_argument_message(
      [] { ref::reduce(ReduceOp::mean, Tensor::zeros({2, 3}), {2}, false); });
  EXPECT_NE(msg.find("reduce_mean: axes [2] for src [2, 3]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
