// concat_test.cpp: cat and stack along each dim, channels-last inputs, mixed dtypes.
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

// ---- cat and stack ----

TEST(Concat, CatAlongEachDim) {
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

TEST(Concat, CatOfChannelsLastInputsUsesLogicalOrder) {
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

TEST(Concat, StackAddsADim) {
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

TEST(Concat, MixedDtypesWithoutAutocastGoToTheCommonDtype) {
  const Tensor a = Tensor::from_vector({1.5f}, {1}, DType::bf16),
               b = Tensor::from_vector({2.25f}, {1});
  const Tensor y = cat({a, b}, 0);
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_all_near(y, {1.5, 2.25}, 0.0);
  EXPECT_EQ(stack({a, Tensor::from_vector({1.f}, {1}, DType::f16)}, 0).dtype(), DType::f32);
}

}  // namespace
}  // namespace mixprec
