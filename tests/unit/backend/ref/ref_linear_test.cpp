// ref_linear_test.cpp: backend/ref linear (forward against hand-computed values, backward
// against central differences) and matmul (hand-computed, transposes, broadcast batches).
#include <gtest/gtest.h>

#include "backend/kernels.h"
#include "common/finite_diff.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using test::values_near;

TEST(RefLinear, ForwardHandComputed) {
  // [[1,2,3],[4,5,6]] x [[1,0,-1],[2,1,0]]^T + [0.5, -1].
  Tensor src = Tensor::from_vector_f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = Tensor::from_vector_f64({1, 0, -1, 2, 1, 0}, {2, 3});
  Tensor b = Tensor::from_vector_f64({0.5, -1}, {2});
  Tensor dst = ref::linear_forward(src, w, b);
  EXPECT_EQ(dst.shape(), (Shape{2, 2}));
  EXPECT_TRUE(values_near(dst, {-1.5, 3, -1.5, 12}, 0.0));
  EXPECT_TRUE(values_near(ref::linear_forward(src, w, Tensor()), {-2, 4, -2, 13}, 0.0));
}

TEST(RefLinear, ForwardReadsTransposedViewAndKeepsF16) {
  // src as the transposed view of a [3, 2] buffer: same logical [[1,2,3],[4,5,6]].
  Tensor buf = Tensor::from_vector({1, 4, 2, 5, 3, 6}, {3, 2}, DType::f16);
  Tensor src = buf.as_strided({2, 3}, {1, 2}, 0);
  Tensor w = Tensor::from_vector({1, 0, -1, 2, 1, 0}, {2, 3}, DType::f16);
  Tensor dst = ref::linear_forward(src, w, Tensor());
  EXPECT_EQ(dst.dtype(), DType::f16);
  EXPECT_TRUE(values_near(dst, {-2, 4, -2, 13}, 0.0));
}

// f(src, w, b) = <diff_dst, linear(src, w, b)> is linear in each input: central differences
// carry only roundoff (~1e-16 * |f| / eps ~ 1e-10), so rtol 1e-6 has a wide margin.
TEST(RefLinear, BackwardMatchesFiniteDifferences) {
  Tensor src = test::random_tensor({4, 5}, 1);
  Tensor w = test::random_tensor({3, 5}, 2);
  Tensor b = test::random_tensor({3}, 3);
  const Tensor diff_dst = test::random_tensor({4, 3}, 4);
  test::ScalarFn f = [&](std::vector<Tensor>& in) {
    return test::dot_f64(diff_dst, ref::linear_forward(in[0], in[1], in[2]));
  };
  std::vector<Tensor> inputs{src, w, b};
  backend::WeightGrads g = ref::linear_backward_weights(src, diff_dst, true);
  EXPECT_TRUE(test::gradients_match(ref::linear_backward_data(diff_dst, w),
                                    test::numerical_gradient(f, inputs, 0), 1e-6));
  EXPECT_TRUE(test::gradients_match(g.diff_weights, test::numerical_gradient(f, inputs, 1), 1e-6));
  EXPECT_TRUE(test::gradients_match(g.diff_bias, test::numerical_gradient(f, inputs, 2), 1e-6));
  EXPECT_FALSE(ref::linear_backward_weights(src, diff_dst, false).diff_bias.defined());
}

TEST(RefMatmul, TwoByTwoWithEveryTransposeFlag) {
  Tensor a = Tensor::from_vector_f64({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector_f64({5, 6, 7, 8}, {2, 2});
  EXPECT_TRUE(values_near(ref::matmul(a, b, false, false), {19, 22, 43, 50}, 0.0));
  EXPECT_TRUE(values_near(ref::matmul(a, b, true, false), {26, 30, 38, 44}, 0.0));
  EXPECT_TRUE(values_near(ref::matmul(a, b, false, true), {17, 23, 39, 53}, 0.0));
  EXPECT_TRUE(values_near(ref::matmul(a, b, true, true), {23, 31, 34, 46}, 0.0));
}

TEST(RefMatmul, NonSquareTransposeA) {
  // [[1,2,3],[4,5,6]] x [1,0,-1]^T = [-2, -2]; the same a stored as its [3, 2] transpose.
  Tensor b = Tensor::from_vector_f64({1, 0, -1}, {3, 1});
  Tensor a = Tensor::from_vector_f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor at = Tensor::from_vector_f64({1, 4, 2, 5, 3, 6}, {3, 2});
  EXPECT_EQ(ref::matmul(a, b, false, false).shape(), (Shape{2, 1}));
  EXPECT_TRUE(values_near(ref::matmul(a, b, false, false), {-2, -2}, 0.0));
  EXPECT_TRUE(values_near(ref::matmul(at, b, true, false), {-2, -2}, 0.0));
  // b^T given as [1, 3] with trans_b.
  Tensor bt = Tensor::from_vector_f64({1, 0, -1}, {1, 3});
  EXPECT_TRUE(values_near(ref::matmul(at, bt, true, true), {-2, -2}, 0.0));
}

TEST(RefMatmul, BroadcastsBatchDims) {
  // a [2,1,2,2]: a_0 = I, a_1 = 2I. b [3,2,2]: b_j = [[j+1, 1], [0, j+1]].
  // Out [2,3,2,2]: out[i][j] = (i+1) * b_j.
  Tensor a = Tensor::from_vector_f64({1, 0, 0, 1, 2, 0, 0, 2}, {2, 1, 2, 2});
  Tensor b = Tensor::from_vector_f64({1, 1, 0, 1, 2, 1, 0, 2, 3, 1, 0, 3}, {3, 2, 2});
  Tensor dst = ref::matmul(a, b, false, false);
  ASSERT_EQ(dst.shape(), (Shape{2, 3, 2, 2}));
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (double v : {j + 1.0, 1.0, 0.0, j + 1.0}) expected.push_back((i + 1) * v);
  EXPECT_TRUE(values_near(dst, expected, 0.0));
  // 3-D x 2-D: b is shared by every batch.
  Tensor a3 = Tensor::from_vector_f64({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});
  Tensor b2 = Tensor::from_vector_f64({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(values_near(ref::matmul(a3, b2, false, false), {1, 2, 3, 4, 2, 4, 6, 8}, 0.0));
}

TEST(RefLinear, ErrorsNameTheOpAndBothShapes) {
  EXPECT_EQ(test::invalid_argument_message([] {
              ref::linear_forward(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), Tensor());
            }),
            "linear: src [2, 3] and weights [4, 5]: in-features mismatch 3 vs 5");
  std::string msg = test::invalid_argument_message([] {
    ref::linear_backward_data(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
  });
  EXPECT_NE(msg.find("linear_backward_data: diff_dst [2, 3] and weights [4, 5]"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message([] {
    ref::linear_backward_weights(Tensor::zeros({2, 3}), Tensor::zeros({5, 4}), true);
  });
  EXPECT_NE(msg.find("linear_backward_weights: src [2, 3] and diff_dst [5, 4]"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message([] {
    ref::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), false, false);
  });
  EXPECT_NE(msg.find("matmul: a [2, 3] and b [4, 5]: inner dims mismatch 3 vs 4"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message([] {
    ref::matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4}), false, false);
  });
  EXPECT_NE(msg.find("matmul: a [2, 2, 3] and b [3, 3, 4]: batch dims are not broadcastable"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message([] {
    ref::matmul(Tensor::zeros({3}), Tensor::zeros({3, 4}), false, false);
  });
  EXPECT_NE(msg.find("at least 2-D"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
