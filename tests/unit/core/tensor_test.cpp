// tensor_test.cpp: the Tensor handle itself (issue 13: no unit test): shapes and row-major
// strides, views that share storage (detach, as_strided, reshape of a contiguous tensor),
// copies that do not (clone, reshape of a strided view, to), channels-last order, dtype
// round trips checked against values representable in each dtype, and the errors a wrong
// use gets.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec {
namespace {

TEST(Tensor, ShapeStridesAndNumel) {
  const Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));  // row-major
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(Tensor::zeros({0, 5}).numel(), 0);
  EXPECT_EQ(Tensor::scalar(2.5).numel(), 1);
  EXPECT_EQ(Tensor::scalar(2.5).item(), 2.5);
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, FactoriesHoldTheirValues) {
  EXPECT_EQ(Tensor::ones({3}, DType::bf16).to_vector_f64(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(Tensor::full({2}, -0.75, DType::f16).to_vector_f64(), (std::vector<double>{-0.75, -0.75}));
  EXPECT_EQ(Tensor::from_vector_i64({-3, 9}, {2}).to_vector_f64(), (std::vector<double>{-3, 9}));
  const Tensor u = Tensor::uniform({1000}, -2.0, 3.0);
  for (double v : u.to_vector_f64()) ASSERT_TRUE(v >= -2.0 && v < 3.0) << v;
}

TEST(Tensor, ViewsShareStorageAndCopiesDoNot) {
  Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor view = t.detach();
  Tensor r = t.reshape({3, 2});
  Tensor c = t.clone();
  t.fill_(7);
  EXPECT_EQ(view.to_vector_f64(), std::vector<double>(6, 7.0));
  EXPECT_EQ(r.to_vector_f64(), std::vector<double>(6, 7.0));  // reshape of a contiguous tensor is a view
  EXPECT_EQ(c.to_vector_f64(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(t.to(DType::f32).same(t));  // no copy when already f32
  EXPECT_FALSE(t.to(DType::f64).same(t));
}

TEST(Tensor, AsStridedTransposeIsNotContiguousAndCopiesInLogicalOrder) {
  const Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor tt = t.as_strided({3, 2}, {1, 3}, 0);  // the transpose
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_vector_f64(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  const Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector_f64(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(tt.reshape({6}).to_vector_f64(), (std::vector<double>{1, 4, 2, 5, 3, 6}));  // copies
  EXPECT_EQ(t.as_strided({2}, {1}, 4).to_vector_f64(), (std::vector<double>{5, 6}));  // storage offset
}

TEST(Tensor, ChannelsLastKeepsLogicalValues) {
  std::vector<float> v(2 * 3 * 2 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  const Tensor t = Tensor::from_vector(v, {2, 3, 2, 2});
  const Tensor cl = t.to_memory_format(MemoryFormat::channels_last);
  EXPECT_TRUE(cl.is_channels_last());
  EXPECT_EQ(cl.strides(), (Shape{12, 1, 6, 3}));  // NHWC memory order
  EXPECT_EQ(cl.to_vector_f64(), t.to_vector_f64());
  // In memory, channels are adjacent: element (0, c=1, 0, 0) sits right after (0, c=0, 0, 0).
  EXPECT_EQ(cl.data_ptr<float>()[1], 4.0f);
}

TEST(Tensor, DtypeRoundTripsAreExactForRepresentableValues) {
  // Values exact in bf16 (8 significant bits) and f16 (11), and their f16 subnormal.
  const std::vector<double> bf16_exact = {0.0, -0.0, 1.0, -3.5, 0.1171875, 65280.0, std::ldexp(1.0, -126)};
  EXPECT_EQ(Tensor::from_vector_f64(bf16_exact, {7}).to(DType::bf16).to(DType::f64).to_vector_f64(), bf16_exact);
  const std::vector<double> f16_exact = {1.0, -2047.0, 65504.0, std::ldexp(1.0, -24), 0.333251953125};
  EXPECT_EQ(Tensor::from_vector_f64(f16_exact, {5}).to(DType::f16).to(DType::f64).to_vector_f64(), f16_exact);
  // Round to nearest even: 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7.
  EXPECT_EQ(Tensor::scalar(1.0 + std::ldexp(1.0, -8), DType::f64).to(DType::bf16).item(), 1.0);
  EXPECT_EQ(Tensor::scalar(1.0 + 3 * std::ldexp(1.0, -8), DType::f64).to(DType::bf16).item(), 1.0 + std::ldexp(1.0, -6));
  // Overflow to f16 is inf, NaN stays NaN.
  EXPECT_TRUE(std::isinf(Tensor::scalar(70000.0, DType::f64).to(DType::f16).item()));
  EXPECT_TRUE(std::isnan(Tensor::scalar(std::nan(""), DType::f64).to(DType::bf16).item()));
}

TEST(Tensor, WrongUseIsAnErrorNotACrash) {
  const Tensor t = Tensor::zeros({2, 3});
  EXPECT_THROW(t.reshape({4, 2}), Error);  // 6 elements are not 8
  EXPECT_THROW(t.reshape({-1, -1}), Error);
  EXPECT_THROW(t.item(), Error);  // 6 elements
  Tensor u = Tensor::zeros({3});
  EXPECT_THROW(u.copy_(Tensor::zeros({4})), Error);
}

}  // namespace
}  // namespace mixprec
