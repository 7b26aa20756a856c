// ref_binary_test.cpp: backend/ref elementwise binary ops: hand-computed broadcasts,
// NaN in max/min, strided inputs, and the broadcasting error message.
#include <gtest/gtest.h>

#include <limits>

#include "backend/kernels.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using backend::BinaryOp;
using test::values_near;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(RefBinary, SameShapeOps) {
  Tensor a = Tensor::from_vector_f64({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector_f64({4, -2, 0.5, 4}, {2, 2});
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::add, a, b), {5, 0, 3.5, 8}, 0.0));
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::sub, a, b), {-3, 4, 2.5, 0}, 0.0));
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::mul, a, b), {4, -4, 1.5, 16}, 0.0));
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::div, a, b), {0.25, -1, 6, 1}, 0.0));
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::max, a, b), {4, 2, 3, 4}, 0.0));
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::min, a, b), {1, -2, 0.5, 4}, 0.0));
}

TEST(RefBinary, BroadcastsRowColumnAndRank) {
  // [2, 3] + [3]: the row repeats.
  Tensor m = Tensor::from_vector_f64({0, 1, 2, 10, 11, 12}, {2, 3});
  Tensor row = Tensor::from_vector_f64({100, 200, 300}, {3});
  Tensor dst = ref::binary(BinaryOp::add, m, row);
  EXPECT_EQ(dst.shape(), (Shape{2, 3}));
  EXPECT_TRUE(values_near(dst, {100, 201, 302, 110, 211, 312}, 0.0));
  // [2, 1] * [1, 3]: an outer product.
  Tensor col = Tensor::from_vector_f64({1, 2}, {2, 1});
  Tensor r13 = Tensor::from_vector_f64({3, 4, 5}, {1, 3});
  dst = ref::binary(BinaryOp::mul, col, r13);
  EXPECT_EQ(dst.shape(), (Shape{2, 3}));
  EXPECT_TRUE(values_near(dst, {3, 4, 5, 6, 8, 10}, 0.0));
  // [2, 1, 3] - [2, 1] -> [2, 2, 3]: out[i][j][k] = a[i][0][k] - b[j][0].
  Tensor a = Tensor::from_vector_f64({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  Tensor b = Tensor::from_vector_f64({0, 10}, {2, 1});
  dst = ref::binary(BinaryOp::sub, a, b);
  EXPECT_EQ(dst.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(values_near(dst, {1, 2, 3, -9, -8, -7, 4, 5, 6, -6, -5, -4}, 0.0));
  // A 0-d scalar broadcasts against anything.
  dst = ref::binary(BinaryOp::div, m, Tensor::from_vector_f64({2}, {}));
  EXPECT_TRUE(values_near(dst, {0, 0.5, 1, 5, 5.5, 6}, 0.0));
}

TEST(RefBinary, MaxMinPropagateNaN) {
  Tensor a = Tensor::from_vector_f64({kNaN, 1, kNaN}, {3});
  Tensor b = Tensor::from_vector_f64({1, kNaN, kNaN}, {3});
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::max, a, b), {kNaN, kNaN, kNaN}, 0.0));
  EXPECT_TRUE(values_near(ref::binary(BinaryOp::min, a, b), {kNaN, kNaN, kNaN}, 0.0));
}

TEST(RefBinary, ReadsTransposedViewAndKeepsBf16) {
  // The transpose of [[1, 2], [3, 4]] as a strided view: [[1, 3], [2, 4]].
  Tensor buf = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::bf16);
  Tensor t = buf.as_strided({2, 2}, {1, 2}, 0);
  Tensor dst = ref::binary(BinaryOp::sub, t, Tensor::from_vector({1, 1}, {2}, DType::bf16));
  EXPECT_EQ(dst.dtype(), DType::bf16);
  EXPECT_TRUE(dst.is_contiguous());
  EXPECT_TRUE(values_near(dst, {0, 2, 1, 3}, 0.0));
}

TEST(RefBinary, ErrorsNameTheOpAndBothShapes) {
  EXPECT_EQ(test::invalid_argument_message([] {
              ref::binary(BinaryOp::add, Tensor::zeros({4, 3}), Tensor::zeros({5}));
            }),
            "add: shapes [4, 3] and [5] are not broadcastable (dim -1: 3 vs 5)");
  EXPECT_EQ(test::invalid_argument_message([] {
              ref::binary(BinaryOp::mul, Tensor::zeros({2, 3, 4}), Tensor::zeros({5, 1}));
            }),
            "mul: shapes [2, 3, 4] and [5, 1] are not broadcastable (dim -2: 3 vs 5)");
  std::string msg = test::invalid_argument_message([] {
    ref::binary(BinaryOp::max, Tensor::zeros({2}), Tensor::zeros({2}, DType::f64));
  });
  EXPECT_NE(msg.find("max: dtype mismatch: a f32 vs b f64"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
