// embedding_test.cpp: what the op harness (registry) does not check for embedding: errors
// naming the bad index or weight, the output shape for multi-dimensional indices, that a
// bf16 weight's gradient is accumulated in f32 and rounded once (a float64 sum, rounded,
// is the reference: summed in bf16 it would stall), and that the forward copies rows
// bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

TEST(Embedding, ShapeIsIndicesShapePlusDimAndRowsAreCopiedExactly) {
  const Tensor w = Tensor::from_vector({0.1f, 0.2f, 1.5f, -3.25f, 7.0f, 1e-30f}, {3, 2}, DType::bf16);
  const Tensor idx = Tensor::from_vector_i64({2, 0, 2, 1}, {2, 2});
  const Tensor out = embedding(idx, w);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(out.dtype(), DType::bf16);
  const std::vector<double> o = out.to_vector_f64(), wv = w.to_vector_f64();
  const int rows[] = {2, 0, 2, 1};
  for (int i = 0; i < 4; ++i)
    for (int d = 0; d < 2; ++d) EXPECT_EQ(o[size_t(i * 2 + d)], wv[size_t(rows[i] * 2 + d)]);
}

TEST(Embedding, BadIndicesAndWeightsAreErrorsNamingThem) {
  const Tensor w = Tensor::zeros({4, 3});
  try {
    embedding(Tensor::from_vector_i64({1, 4}, {2}), w);
    FAIL() << "index 4 of 4 rows accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 4 at position 1 is out of range [0, 4)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(embedding(Tensor::from_vector_i64({-1}, {1}), w), Error);
  EXPECT_THROW(embedding(Tensor::zeros({2}), w), Error);                          // float indices
  EXPECT_THROW(embedding(Tensor::from_vector_i64({0}, {1}), Tensor::zeros({4})), Error);  // 1-D weight
}

// 3000 lookups of one row with gradient 0.01 each: in bf16 the running sum stalls near 4
// (adding 0.01 to 4 rounds back to 4); accumulated in f32 and rounded once it is 30.
TEST(Embedding, Bf16WeightGradientAccumulatesInF32AndRoundsOnce) {
  const int64_t n = 3000;
  Tensor w = Tensor::zeros({3, 2}, DType::bf16);
  w.requires_grad_(true);
  const Tensor idx = Tensor::from_vector_i64(std::vector<int64_t>(size_t(n), 1), {n});
  Tensor out = embedding(idx, w);
  Tensor loss = sum(mul(out.to(DType::f32), 0.01));
  loss.backward();
  const std::vector<double> g = w.grad().to_vector_f64();
  ASSERT_EQ(w.grad().dtype(), DType::bf16);
  double expect = 0;
  for (int64_t i = 0; i < n; ++i) expect += double(float(0.01));
  const double rounded = Tensor::from_vector_f64({expect}, {1}, DType::bf16).to_vector_f64()[0];
  EXPECT_EQ(g[2], rounded);
  EXPECT_EQ(g[3], rounded);
  EXPECT_EQ(g[0], 0.0);  // a row never looked up
  EXPECT_EQ(g[5], 0.0);
  EXPECT_GT(rounded, 29.0);
}

}  // namespace
}  // namespace mixprec
