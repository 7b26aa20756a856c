// onednn_softmax_test.cpp: backend::onednn softmax / log_softmax, forward and backward,
// against hand-computed values and backend::ref in f64.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/kernels.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using test::close_to_ref;
using test::f64;
using test::random_input;

TEST(OneDnnSoftmax, HandComputed) {
  // softmax([0, ln 3]) = [1/4, 3/4]; log_softmax = [-ln 4, ln 3 - ln 4].
  Tensor x = Tensor::from_vector_f64({0, std::log(3.0)}, {1, 2}, DType::f32);
  EXPECT_TRUE(test::close_to_ref(onednn::softmax_forward(x, 1),
                                 Tensor::from_vector_f64({0.25, 0.75}, {1, 2}), {1e-6, 1e-7}));
  EXPECT_TRUE(test::close_to_ref(onednn::log_softmax_forward(x, 1),
                                 Tensor::from_vector_f64({-std::log(4.0), std::log(0.75)}, {1, 2}),
                                 {1e-6, 5e-6}));  // oneDNN's log: absolute error ~4e-6
}

struct SoftmaxCase {
  Shape shape;
  int64_t axis;
};
// [N, classes] as the loss uses it, attention rows, and a middle axis.
const SoftmaxCase kCases[] = {{{16, 10}, 1}, {{2, 3, 7, 33}, 3}, {{4, 9, 5}, 1}, {{6, 4}, 0}};

TEST(OneDnnSoftmax, MatchesRef) {
  uint64_t seed = 10;
  for (DType dt : {DType::f32, DType::bf16})
    for (const SoftmaxCase& c : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(c.shape) + " axis " +
                   std::to_string(c.axis));
      const int64_t n = c.shape[c.axis];
      // Logits in [-4, 4): exponentials over a range of e^8 so the max shift matters.
      Tensor x = random_input(c.shape, dt, ++seed, MemoryFormat::contiguous, -4, 4);
      Tensor dd = random_input(c.shape, dt, ++seed);
      // f32: exp is within a few ulps and the sum over n terms adds eps*sqrt(n); oneDNN's
      // log has an absolute error up to ~4e-6 (eltwise.cpp), hence atol 5e-6 for log_softmax.
      // bf16: one rounding of the output, rtol 2^-8.
      const test::Tol t = dt == DType::bf16 ? test::Tol{std::ldexp(1.0, -8), 1e-5}
                                            : test::Tol{1e-5, 5e-6};
      Tensor y = onednn::softmax_forward(x, c.axis);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(close_to_ref(y, ref::softmax_forward(f64(x), c.axis), t));
      Tensor ly = onednn::log_softmax_forward(x, c.axis);
      EXPECT_TRUE(close_to_ref(ly, ref::log_softmax_forward(f64(x), c.axis), t));
      // Backward from the same dst values (onednn's, converted exactly) on both sides.
      // diff_src = y * (dd - sum(dd * y)) sums n terms: tolerance as a reduction of n.
      // bf16 runs in f32 and rounds once (softmax.cpp): rtol 2^-8 for that rounding; atol
      // 2^-16 for the f32 error before it where y * (dd - sum) cancels to near zero.
      const test::Tol tb = dt == DType::bf16 ? test::Tol{std::ldexp(1.0, -8), std::ldexp(1.0, -16)}
                                             : test::Tol{1e-5, 1e-6 * std::sqrt(double(n))};
      EXPECT_TRUE(close_to_ref(onednn::softmax_backward(dd, y, c.axis),
                               ref::softmax_backward(f64(dd), f64(y), c.axis), tb));
      EXPECT_TRUE(close_to_ref(onednn::log_softmax_backward(dd, ly, c.axis),
                               ref::log_softmax_backward(f64(dd), f64(ly), c.axis), tb));
    }
}

TEST(OneDnnSoftmax, LargeLogitsDoNotOverflow) {
  // exp(1000) overflows f32; the max-subtracted form does not.
  Tensor x = Tensor::from_vector({1000, 1000, 999}, {1, 3});
  const std::vector<float> y = onednn::softmax_forward(x, 1).to_vector();
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(y[0], 1 / (2 + std::exp(-1.0)), 1e-6);
}

TEST(OneDnnSoftmax, AxisOutOfRangeAndF16) {
  Tensor x = random_input({2, 3}, DType::f32, 90);
  const std::string msg = test::error_message(StatusCode::invalid_argument,
                                              [&] { onednn::softmax_forward(x, 2); });
  EXPECT_NE(msg.find("axis"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
