// ref_softmax_test.cpp: backend/ref softmax / log_softmax against log-sum-exp computed
// here, on the last and on inner axes, with large inputs and NaN; backward against central
// differences; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "common/finite_diff.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using test::values_near;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(RefSoftmax, LogSoftmaxOfOneTwoThree) {
  // Naive log-sum-exp (no max shift: harmless for these inputs). The kernel shifts by the
  // max first, so the two differ by a few ulps: 1e-15.
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  Tensor dst = ref::log_softmax_forward(Tensor::from_vector_f64({1, 2, 3}, {1, 3}), 1);
  EXPECT_EQ(dst.shape(), (Shape{1, 3}));
  EXPECT_TRUE(values_near(dst, {1 - lse, 2 - lse, 3 - lse}, 1e-15));
  Tensor sm = ref::softmax_forward(Tensor::from_vector_f64({1, 2, 3}, {3}), 0);
  EXPECT_TRUE(values_near(sm, {std::exp(1 - lse), std::exp(2 - lse), std::exp(3 - lse)}, 1e-15));
}

TEST(RefSoftmax, InnerAxis) {
  // Softmax down the columns of [[0, 1, 0], [0, 1, log 3]]: 1/2, 1/2 and 1/4, 3/4.
  Tensor src = Tensor::from_vector_f64({0, 1, 0, 0, 1, std::log(3.0)}, {2, 3});
  EXPECT_TRUE(values_near(ref::softmax_forward(src, 0), {0.5, 0.5, 0.25, 0.5, 0.5, 0.75}, 1e-15));
}

TEST(RefSoftmax, LargeInputsDoNotOverflowInF32) {
  // exp(1000) is inf in any float type: only the max shift makes these finite.
  Tensor src = Tensor::from_vector({1000, 1000, -1000, -1000}, {2, 2}, DType::f32);
  Tensor sm = ref::softmax_forward(src, 1);
  EXPECT_EQ(sm.dtype(), DType::f32);
  EXPECT_TRUE(values_near(sm, {0.5, 0.5, 0.5, 0.5}, 0.0));
  // -log 2 rounded to f32: 1e-7 covers f32's half-ulp (3e-8 at 0.69).
  const double ln2 = std::log(2.0);
  EXPECT_TRUE(values_near(ref::log_softmax_forward(src, 1), {-ln2, -ln2, -ln2, -ln2}, 1e-7));
}

TEST(RefSoftmax, NaNPoisonsOnlyItsRow) {
  Tensor src = Tensor::from_vector_f64({0, kNaN, 5, 0, 0, 0}, {2, 3});
  EXPECT_TRUE(values_near(ref::softmax_forward(src, 1),
                          {kNaN, kNaN, kNaN, 1 / 3.0, 1 / 3.0, 1 / 3.0}, 1e-15));
}

// f(x) = <diff_dst, softmax(x)> is smooth: the central difference's truncation error is
// ~eps^2 * |f'''| ~ 1e-12 and roundoff ~1e-16 * |f| / eps ~ 1e-10, both far below 1e-6.
void check_softmax_gradients(bool log, const Shape& shape, int64_t axis) {
  Tensor src = test::random_tensor(shape, 21, -2.0, 2.0);
  const Tensor diff_dst = test::random_tensor(shape, 22);
  auto forward = [&](const Tensor& x) {
    return log ? ref::log_softmax_forward(x, axis) : ref::softmax_forward(x, axis);
  };
  test::ScalarFn f = [&](std::vector<Tensor>& in) {
    return test::dot_f64(diff_dst, forward(in[0]));
  };
  std::vector<Tensor> inputs{src};
  const Tensor dst = forward(src);
  Tensor diff_src = log ? ref::log_softmax_backward(diff_dst, dst, axis)
                        : ref::softmax_backward(diff_dst, dst, axis);
  EXPECT_TRUE(test::gradients_match(diff_src, test::numerical_gradient(f, inputs, 0), 1e-6))
      << (log ? "log_softmax" : "softmax") << " axis " << axis;
}

TEST(RefSoftmax, BackwardMatchesFiniteDifferences) {
  for (int64_t axis : {0, 1, 2}) {
    check_softmax_gradients(false, {2, 3, 4}, axis);
    check_softmax_gradients(true, {2, 3, 4}, axis);
  }
}

TEST(RefSoftmax, ErrorsNameTheOpAndShapes) {
  std::string msg = test::invalid_argument_message(
      [] { ref::softmax_forward(Tensor::zeros({2, 3}), 2); });
  EXPECT_NE(msg.find("softmax: axis 2 out of range for src [2, 3]"), std::string::npos) << msg;
  msg = test::invalid_argument_message(
      [] { ref::log_softmax_backward(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}), 1); });
  EXPECT_NE(msg.find("log_softmax_backward: diff_dst [2, 3] and dst [3, 2]"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace mixprec
