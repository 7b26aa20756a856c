// ref_eltwise_test.cpp: backend/ref relu (forward values, NaN, backward against central
// differences) and the unary math ops against exactly known values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "common/finite_diff.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using backend::UnaryOp;
using test::values_near;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(RefRelu, ForwardClampsNegativesAndKeepsNaN) {
  Tensor src = Tensor::from_vector_f64({-2, -0.5, 0, 0.25, 3, kNaN}, {2, 3});
  Tensor dst = ref::relu_forward(src);
  EXPECT_EQ(dst.shape(), (Shape{2, 3}));
  EXPECT_TRUE(values_near(dst, {0, 0, 0, 0.25, 3, kNaN}, 0.0));
}

TEST(RefRelu, ForwardOnBf16StridedView) {
  // Every other element of [-1, 9, 2, 9, -3, 9, 4, 9]: [-1, 2, -3, 4] -> [0, 2, 0, 4].
  Tensor buf = Tensor::from_vector({-1, 9, 2, 9, -3, 9, 4, 9}, {8}, DType::bf16);
  Tensor dst = ref::relu_forward(buf.as_strided({4}, {2}, 0));
  EXPECT_EQ(dst.dtype(), DType::bf16);
  EXPECT_TRUE(values_near(dst, {0, 2, 0, 4}, 0.0));
}

TEST(RefRelu, BackwardMatchesFiniteDifferences) {
  // Inputs kept at least 0.1 away from the kink at 0, so +-1e-6 never crosses it and the
  // difference is exact up to roundoff (rtol 1e-6 is generous).
  std::vector<double> v = test::random_tensor({3, 4}, 5).to_vector_f64();
  for (double& x : v) x = x < 0 ? x - 0.1 : x + 0.1;
  Tensor src = Tensor::from_vector_f64(v, {3, 4});
  const Tensor diff_dst = test::random_tensor({3, 4}, 6);
  test::ScalarFn f = [&](std::vector<Tensor>& in) {
    return test::dot_f64(diff_dst, ref::relu_forward(in[0]));
  };
  std::vector<Tensor> inputs{src};
  Tensor diff_src = ref::relu_backward(diff_dst, ref::relu_forward(src));
  EXPECT_TRUE(test::gradients_match(diff_src, test::numerical_gradient(f, inputs, 0), 1e-6));
}

TEST(RefRelu, BackwardZeroesWhereDstIsZero) {
  Tensor dst = Tensor::from_vector_f64({0, 1, 0, 2}, {4});
  Tensor diff_dst = Tensor::from_vector_f64({5, 6, 7, 8}, {4});
  EXPECT_TRUE(values_near(ref::relu_backward(diff_dst, dst), {0, 6, 0, 8}, 0.0));
}

TEST(RefUnary, KnownValues) {
  Tensor src = Tensor::from_vector_f64({0, 1, 4, -3}, {4});
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::neg, src), {0, -1, -4, 3}, 0.0));
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::abs, src), {0, 1, 4, 3}, 0.0));
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::square, src), {0, 1, 16, 9}, 0.0));
  // sqrt(-3) and log(-3) are NaN, log(0) is -inf.
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::sqrt, src), {0, 1, 2, kNaN}, 0.0));
  Tensor log0 = ref::unary(UnaryOp::log, src);
  EXPECT_EQ(log0.at(0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(values_near(log0.as_strided({1}, {1}, 1), {0}, 0.0));
  EXPECT_TRUE(std::isnan(log0.at(3)));
  // exp(1) = e, tanh(1) = (e^2 - 1)/(e^2 + 1), sigmoid(0) = 1/2, sigmoid(4) = 1/(1 + e^-4):
  // 1e-15 allows the libm's last-bit differences.
  const double e = 2.718281828459045;
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::exp, src).as_strided({1}, {1}, 1), {e}, 1e-15));
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::tanh, src).as_strided({2}, {1}, 0),
                          {0, (e * e - 1) / (e * e + 1)}, 1e-15));
  EXPECT_TRUE(values_near(ref::unary(UnaryOp::sigmoid, src).as_strided({2}, {2}, 0),
                          {0.5, 1 / (1 + 1 / (e * e * e * e))}, 1e-15));
}

TEST(RefUnary, SigmoidSaturatesWithoutNaN) {
  Tensor src = Tensor::from_vector({-1000, 1000}, {2}, DType::f32);
  Tensor dst = ref::unary(UnaryOp::sigmoid, src);
  EXPECT_EQ(dst.dtype(), DType::f32);
  EXPECT_TRUE(values_near(dst, {0, 1}, 0.0));
}

TEST(RefEltwise, ErrorsNameTheOpAndBothShapes) {
  std::string msg = test::invalid_argument_message(
      [] { ref::relu_backward(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})); });
  EXPECT_NE(msg.find("relu_backward: diff_dst [2, 3] and dst [3, 2]"), std::string::npos) << msg;
  msg = test::invalid_argument_message(
      [] { ref::relu_forward(Tensor::from_vector_i64({1, 2}, {2})); });
  EXPECT_NE(msg.find("relu: src has dtype i64"), std::string::npos) << msg;
  msg = test::invalid_argument_message(
      [] { ref::relu_backward(Tensor::zeros({2}), Tensor::zeros({2}, DType::f16)); });
  EXPECT_NE(msg.find("relu_backward: dtype mismatch: diff_dst f32 vs dst f16"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace mixprec
