// add_layer_norm_test.cpp: the fused residual add + LayerNorm (+ rounding for the next GEMM)
// against the composition it replaces (add, layer_norm, cast: each its own op and kernel),
// forward and backward. On f32 streams, with and without bf16 autocast, the two must agree
// bit for bit (the fused kernel makes the same roundings in the same order), at row widths
// with vector tails and at sizes on both sides of the kernels' parallel threshold; with a
// 16-bit stream, within bf16 rounding. Also: one output used and not the other, no branch,
// and the errors. The float64 reference and finite differences are the op harness's
// (registry entries add_layer_norm.*). The _no_avx512 twin runs the baseline row kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <tuple>

#include "common/tensor_checks.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"

namespace mixprec {
namespace {

struct Inputs {
  Tensor x, branch, weight, bias, g_sum, g_normed;
};

Inputs make(const Shape& shape, DType branch_dtype, DType normed_dtype, uint64_t seed) {
  manual_seed(seed);
  const Shape row{shape.back()};
  Inputs in;
  in.x = Tensor::normal(shape, 0.3, 1.0).requires_grad_(true);
  in.branch = Tensor::normal(shape, 0.0, 0.5, branch_dtype).requires_grad_(true);
  in.weight = Tensor::uniform(row, 0.5, 1.5).requires_grad_(true);
  in.bias = Tensor::uniform(row, -0.5, 0.5).requires_grad_(true);
  in.g_sum = Tensor::normal(shape, 0.0, 1.0);
  in.g_normed = Tensor::normal(shape, 0.0, 1.0, normed_dtype);
  return in;
}

struct Outcome {
  Tensor sum, normed, dx, dbranch, dw, db;
};

// Forward (under autocast when ac is given), then one backward from both outputs with
// the fixed upstream gradients (outside autocast, the same ops for both routes).
template <typename F>
Outcome run(Inputs in, std::optional<DType> ac, F&& forward, bool use_sum = true, bool use_normed = true) {
  for (Tensor* t : {&in.x, &in.branch, &in.weight, &in.bias}) t->set_grad(Tensor());
  Outcome r;
  {
    std::optional<amp::AutocastGuard> guard;
    if (ac) guard.emplace(*ac);
    std::tie(r.sum, r.normed) = forward(in);
  }
  Tensor loss;
  if (use_sum) loss = sum(mul(r.sum, in.g_sum));
  if (use_normed) {
    const Tensor l = sum(mul(r.normed, in.g_normed));
    loss = loss.defined() ? add(loss, l.to(loss.dtype())) : l;
  }
  loss.backward();
  r.dx = in.x.grad(), r.dbranch = in.branch.grad(), r.dw = in.weight.grad(), r.db = in.bias.grad();
  return r;
}

std::pair<Tensor, Tensor> fused(const Inputs& in, std::optional<DType> normed_dtype) {
  const ResidualLayerNorm r =
      add_layer_norm(in.x, in.branch, {in.x.size(-1)}, in.weight, in.bias, 1e-5, normed_dtype);
  return {r.sum, r.normed};
}

std::pair<Tensor, Tensor> composed(const Inputs& in, std::optional<DType> normed_dtype) {
  const Tensor s = add(in.x, in.branch);
  const Tensor n = layer_norm(s, {in.x.size(-1)}, in.weight, in.bias, 1e-5);
  return {s, normed_dtype ? n.to(*normed_dtype) : n};
}

// Equal bytes, or both undefined (a gradient that no used output reaches).
::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined())
    return a.defined() == b.defined() ? ::testing::AssertionSuccess()
                                      : ::testing::AssertionFailure() << "one of the two is undefined";
  return test::bits_equal(a, b);
}

void expect_same(const Outcome& a, const Outcome& b) {
  EXPECT_TRUE(bits_equal(a.sum, b.sum)) << "sum";
  EXPECT_TRUE(bits_equal(a.normed, b.normed)) << "normed";
  EXPECT_TRUE(bits_equal(a.dx, b.dx)) << "dx";
  EXPECT_TRUE(bits_equal(a.dbranch, b.dbranch)) << "dbranch";
  EXPECT_TRUE(bits_equal(a.dw, b.dw)) << "dweight";
  EXPECT_TRUE(bits_equal(a.db, b.db)) << "dbias";
}

// Rows of 100 (vector tails) and 136; 11,100 and 34,816 elements: serial and threaded.
const Shape kShapes[] = {{3, 37, 100}, {4, 64, 136}};

TEST(AddLayerNorm, MatchesTheCompositionBitForBitUnderBf16Autocast) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_str(shape));
    // The GPT's case: an f32 stream, a bf16 branch, the output for the next GEMM in bf16.
    const Inputs in = make(shape, DType::bf16, DType::bf16, 7);
    const auto f = [](const Inputs& i) { return fused(i, DType::bf16); };
    const auto c = [](const Inputs& i) { return composed(i, DType::bf16); };
    const Outcome a = run(in, DType::bf16, f), b = run(in, DType::bf16, c);
    EXPECT_EQ(a.sum.dtype(), DType::f32);
    EXPECT_EQ(a.normed.dtype(), DType::bf16);
    EXPECT_EQ(a.dbranch.dtype(), DType::bf16);
    expect_same(a, b);
    // The encoder's case: the normed output is the f32 stream.
    const Inputs in32 = make(shape, DType::bf16, DType::f32, 8);
    const auto f32 = [](const Inputs& i) { return fused(i, std::nullopt); };
    const auto c32 = [](const Inputs& i) { return composed(i, std::nullopt); };
    expect_same(run(in32, DType::bf16, f32), run(in32, DType::bf16, c32));
  }
}

TEST(AddLayerNorm, MatchesTheCompositionBitForBitInF32) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_str(shape));
    const Inputs in = make(shape, DType::f32, DType::f32, 9);
    const auto f = [](const Inputs& i) { return fused(i, std::nullopt); };
    const auto c = [](const Inputs& i) { return composed(i, std::nullopt); };
    expect_same(run(in, std::nullopt, f), run(in, std::nullopt, c));
  }
}

TEST(AddLayerNorm, OneOutputUsedAlone) {
  const Shape shape{4, 64, 136};
  const Inputs in = make(shape, DType::bf16, DType::bf16, 10);
  const auto f = [](const Inputs& i) { return fused(i, DType::bf16); };
  const auto c = [](const Inputs& i) { return composed(i, DType::bf16); };
  // Only the normed output reaches the loss (a post-norm layer), then only the stream.
  expect_same(run(in, DType::bf16, f, false, true), run(in, DType::bf16, c, false, true));
  expect_same(run(in, DType::bf16, f, true, false), run(in, DType::bf16, c, true, false));
}

TEST(AddLayerNorm, WithoutABranchIsLayerNormThenTheCast) {
  Inputs in = make({5, 33, 72}, DType::f32, DType::bf16, 11);
  Tensor fused_n, composed_n;
  for (Tensor* t : {&in.x, &in.weight, &in.bias}) t->set_grad(Tensor());
  {
    amp::AutocastGuard ac(DType::bf16);
    const ResidualLayerNorm r = add_layer_norm(in.x, Tensor(), {72}, in.weight, in.bias, 1e-5, DType::bf16);
    EXPECT_TRUE(bits_equal(r.sum, in.x));  // x itself
    fused_n = r.normed;
    composed_n = layer_norm(in.x, {72}, in.weight, in.bias, 1e-5).to(DType::bf16);
  }
  EXPECT_TRUE(bits_equal(fused_n, composed_n));
  sum(mul(fused_n, in.g_normed)).backward();
  const Tensor dx = in.x.grad().clone(), dw = in.weight.grad().clone(), db = in.bias.grad().clone();
  for (Tensor* t : {&in.x, &in.weight, &in.bias}) t->set_grad(Tensor());
  sum(mul(composed_n, in.g_normed)).backward();
  EXPECT_TRUE(bits_equal(dx, in.x.grad()));
  EXPECT_TRUE(bits_equal(dw, in.weight.grad()));
  EXPECT_TRUE(bits_equal(db, in.bias.grad()));
}

TEST(AddLayerNorm, Bf16StreamWithinBf16Rounding) {
  // A 16-bit stream (the O3 preset, no autocast): sums and norms round to bf16; the two
  // routes may differ in the last bit where their double and f32 steps round differently.
  manual_seed(12);
  const Shape shape{6, 16, 96};
  const Tensor x = Tensor::normal(shape, 0.0, 1.0, DType::bf16), br = Tensor::normal(shape, 0.0, 1.0, DType::bf16);
  const Tensor w = Tensor::uniform({96}, 0.5, 1.5, DType::bf16), b = Tensor::uniform({96}, -0.5, 0.5, DType::bf16);
  const ResidualLayerNorm r = add_layer_norm(x, br, {96}, w, b);
  EXPECT_EQ(r.sum.dtype(), DType::bf16);
  EXPECT_EQ(r.normed.dtype(), DType::bf16);
  const auto s = add(x, br).to_vector_f64(), n = layer_norm(add(x, br), {96}, w, b).to_vector_f64();
  const auto fs = r.sum.to_vector_f64(), fn = r.normed.to_vector_f64();
  for (size_t i = 0; i < s.size(); ++i) {
    ASSERT_NEAR(fs[i], s[i], std::ldexp(std::abs(s[i]), -8) + 1e-30) << i;
    ASSERT_NEAR(fn[i], n[i], std::ldexp(std::abs(n[i]), -7) + 1e-2) << i;
  }
}

TEST(AddLayerNorm, BadInputsAreClearErrors) {
  const Tensor x = Tensor::zeros({2, 3, 8}), w = Tensor::ones({8}), b = Tensor::zeros({8});
  EXPECT_NE(test::error_of([&] { add_layer_norm(x, Tensor::zeros({2, 3, 7}), {8}, w, b); })
                .find("add_layer_norm: branch [2, 3, 7] does not match x [2, 3, 8]"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { add_layer_norm(x, Tensor::zeros({2, 3, 8}, DType::i64), {8}, w, b); })
                .find("add_layer_norm: branch must be a floating tensor"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { add_layer_norm(x, Tensor(), {6}, Tensor(), Tensor()); }).find("normalized_shape"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { add_layer_norm(x, Tensor(), {8}, w, b, 1e-5, DType::i64); })
                .find("normed_dtype must be floating"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec
