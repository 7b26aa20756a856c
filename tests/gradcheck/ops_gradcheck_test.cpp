// ops_gradcheck_test.cpp: gradients through the public API and the autograd engine against
// central finite differences in float64, for the configurations and compositions one
// registry entry does not reach (strides, padding, no bias or affine, other dims, exponents,
// channels-last inputs, small networks). Each registered op's own gradient check is
// generated from the registry (src/ops/registry.cpp) by tests/unit/ops/op_harness_test.cpp;
// a case that only repeated an entry's configuration is not kept here.
// Loss used: L = sum(op(inputs) * R) with a fixed random R, so every output element
// contributes with a different weight (a plain sum would make layer_norm's input gradient
// identically zero). Dropout's gradient is checked against its own mask (finite
// differences cannot see a random mask).
#include <gtest/gtest.h>

#include <functional>

#include "common/autograd_check.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

using test::random_tensor;
using test::check_op;

TEST(OpsGradcheck, Conv2dWithBiasStrideAndPadding) {
  check_op("conv2d", [](auto& x) { return conv2d(x[0], x[1], x[2], 2, 1); },
           {random_tensor({2, 3, 5, 5}, 1), random_tensor({4, 3, 3, 3}, 2), random_tensor({4}, 3)});
}

TEST(OpsGradcheck, Conv2dNoBias) {
  check_op("conv2d", [](auto& x) { return conv2d(x[0], x[1], Tensor(), 1, 0); },
           {random_tensor({1, 2, 4, 4}, 4), random_tensor({3, 2, 2, 2}, 5)});
}

TEST(OpsGradcheck, ReluAwayFromKink) {
  // Values in [0.1, 1] with random signs: no element within eps of the kink at 0.
  Tensor x = random_tensor({2, 3, 4}, 13, 0.1, 1.0);
  Tensor s = random_tensor({2, 3, 4}, 14);
  {
    NoGradGuard ng;
    std::vector<double> v = x.to_vector_f64(), sv = s.to_vector_f64();
    for (size_t i = 0; i < v.size(); ++i) v[i] *= sv[i] < 0 ? -1 : 1;
    x = Tensor::from_vector_f64(v, x.shape());
  }
  check_op("relu", [](auto& t) { return relu(t[0]); }, {x});
}

TEST(OpsGradcheck, MaxPoolWithDistinctValues) {
  // A random permutation of distinct values spaced 1e-2 apart: no ties within eps.
  std::vector<double> v(2 * 2 * 6 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 37) % v.size()) * 1e-2;
  check_op("max_pool2d", [](auto& t) { return max_pool2d(t[0], 2); },
           {Tensor::from_vector_f64(v, {2, 2, 6, 6})});
  check_op("max_pool2d_3x3_s2_p1", [](auto& t) { return max_pool2d(t[0], 3, 2, 1); },
           {Tensor::from_vector_f64(v, {2, 2, 6, 6})});
}

TEST(OpsGradcheck, AvgPool) {
  check_op("avg_pool2d", [](auto& t) { return avg_pool2d(t[0], 2); }, {random_tensor({1, 2, 4, 6}, 15)});
}

TEST(OpsGradcheck, LogSoftmaxOverDim0) {
  check_op("log_softmax_dim0", [](auto& t) { return log_softmax(t[0], 0); }, {random_tensor({4, 3}, 18)});
}

TEST(OpsGradcheck, BinaryWithBroadcasting) {
  check_op("add", [](auto& t) { return add(t[0], t[1]); },
           {random_tensor({2, 3}, 19), random_tensor({3}, 20)});
  check_op("sub", [](auto& t) { return sub(t[0], t[1]); },
           {random_tensor({2, 1}, 21), random_tensor({2, 3}, 22)});
  check_op("mul", [](auto& t) { return mul(t[0], t[1]); },
           {random_tensor({2, 3}, 23), random_tensor({1, 3}, 24)});
  check_op("div", [](auto& t) { return div(t[0], t[1]); },
           {random_tensor({2, 3}, 25), random_tensor({2, 3}, 26, 0.5, 2.0)});
  check_op("mul_scalar", [](auto& t) { return add(mul(t[0], 2.5), 1.0); }, {random_tensor({4}, 27)});
}

TEST(OpsGradcheck, Reductions) {
  check_op("sum_all", [](auto& t) { return sum(t[0]); }, {random_tensor({2, 3, 4}, 30)});
  check_op("sum_dim", [](auto& t) { return sum(t[0], {1}, false); }, {random_tensor({2, 3, 4}, 31)});
  check_op("mean_keepdim", [](auto& t) { return mean(t[0], {0, 2}, true); },
           {random_tensor({2, 3, 4}, 32)});
}

TEST(OpsGradcheck, NllLossSumAfterLogSoftmax) {
  const Tensor target = Tensor::from_vector_i64({2, 0, 1}, {3});
  check_op("nll_loss_sum", [&](auto& t) { return nll_loss(log_softmax(t[0], 1), target, Reduction::sum); },
           {random_tensor({3, 4}, 34)});
}

TEST(OpsGradcheck, ChannelsLastThenFlatten) {
  check_op("channels_last_then_flatten",
           [](auto& t) { return flatten(t[0].to_memory_format(MemoryFormat::channels_last), 1); },
           {random_tensor({2, 3, 2, 2}, 40)});
}

TEST(OpsGradcheck, SmallCnnEndToEnd) {
  // The training graph in miniature: conv -> relu -> pool -> flatten -> linear -> CE.
  const Tensor target = Tensor::from_vector_i64({1, 0}, {2});
  check_op("cnn",
           [&](auto& t) {
             Tensor h = max_pool2d(relu(conv2d(t[0], t[1], t[2], 1, 1)), 2);
             return cross_entropy(linear(flatten(h, 1), t[3], t[4]), target);
           },
           {random_tensor({2, 1, 4, 4}, 41), random_tensor({2, 1, 3, 3}, 42), random_tensor({2}, 43),
            random_tensor({3, 8}, 44), random_tensor({3}, 45)},
           1e-5 /* relu/max kinks are possible in a composed net; values are random */);
}

// ---- normalisation, activations, pow, joining ----

// attention_from_packed_qkv where its registry entries do not reach: causal and padded
// together, three heads, blocks of 3 over S = 7 (the last one short), a q_scale other than
// 1/sqrt(D).
TEST(OpsGradcheck, AttentionFromPackedQkvCausalPaddedThreeHeads) {
  const Tensor mask = Tensor::from_vector_f64({0, 0, 0, 0, 0, -30000, -30000, -30000, 0, 0, 0, 0, 0, 0}, {2, 7},
                                              DType::f32);
  check_op("attention_from_packed_qkv",
           [mask](auto& x) { return attention_from_packed_qkv(x[0], 2, 3, /*causal=*/true, 0.7, mask, 3); },
           {random_tensor({14, 18}, 21)});
}

TEST(NormActivationJoinGradcheck, LayerNormOverTwoDims) {
  check_op(
      "layer_norm_last_two_dims",
      [](auto& x) {
        return layer_norm(x[0], {3, 4}, x[1], x[2], 1e-3);
      },
      {random_tensor({2, 3, 4}, 4), random_tensor({3, 4}, 5, 0.5, 1.5), random_tensor({3, 4}, 6)});
}

TEST(NormActivationJoinGradcheck, LayerNormWithoutAffine) {
  check_op("layer_norm_no_affine", [](auto& x) { return layer_norm(x[0], {6}); },
           {random_tensor({4, 6}, 7)});
}

TEST(NormActivationJoinGradcheck, BatchNormTrainingInputWeightBias) {
  // Running stats are updated by every call (finite differences call the op many times);
  // training-mode outputs do not read them, so the gradient is unaffected.
  const Tensor rm = Tensor::zeros({3}, DType::f64), rv = Tensor::ones({3}, DType::f64);
  check_op("batch_norm_2d_input",
           [&](auto& x) { return batch_norm(x[0], rm, rv, x[1], x[2], true); },
           {random_tensor({4, 3}, 8), random_tensor({3}, 9, 0.5, 1.5), random_tensor({3}, 10)});
  check_op(
      "batch_norm_nchw",
      [&](auto& x) { return batch_norm(x[0], rm, rv, x[1], x[2], true, 0.1, 1e-3); },
      {random_tensor({2, 3, 2, 3}, 11), random_tensor({3}, 12, 0.5, 1.5), random_tensor({3}, 13)});
}

TEST(NormActivationJoinGradcheck, BatchNormTrainingChannelsLast) {
  check_op(
      "batch_norm_channels_last",
      [](auto& x) {
        return batch_norm(x[0].to_memory_format(MemoryFormat::channels_last), Tensor(), Tensor(),
                          x[1], x[2], true);
      },
      {random_tensor({2, 3, 2, 2}, 14), random_tensor({3}, 15, 0.5, 1.5), random_tensor({3}, 16)});
}

TEST(NormActivationJoinGradcheck, BatchNormEvalUsesFixedRunningStats) {
  const Tensor rm = random_tensor({3}, 17), rv = random_tensor({3}, 18, 0.5, 2.0);
  check_op(
      "batch_norm_eval", [&](auto& x) { return batch_norm(x[0], rm, rv, x[1], x[2], false); },
      {random_tensor({2, 3, 2, 2}, 19), random_tensor({3}, 20, 0.5, 1.5), random_tensor({3}, 21)});
}

TEST(NormActivationJoinGradcheck, BatchNormWithoutAffine) {
  check_op("batch_norm_no_affine",
           [](auto& x) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
           {random_tensor({5, 2}, 22)});
}

TEST(NormActivationJoinGradcheck, Pow) {
  check_op("pow_3", [](auto& x) { return pow(x[0], 3.0); }, {random_tensor({6}, 24)});
  check_op("pow_2", [](auto& x) { return pow(x[0], 2.0); }, {random_tensor({2, 3}, 25)});
  // Fractional and negative exponents need positive bases.
  check_op("pow_2.5", [](auto& x) { return pow(x[0], 2.5); }, {random_tensor({5}, 26, 0.5, 2.0)});
  check_op("pow_-1.5", [](auto& x) { return pow(x[0], -1.5); }, {random_tensor({5}, 27, 0.5, 2.0)});
}

TEST(NormActivationJoinGradcheck, PowZeroExponentHasZeroGradient) {
  Tensor x = random_tensor({4}, 28).requires_grad_(true);
  sum(pow(x, 0.0)).backward();
  for (double g : x.grad().to_vector_f64()) EXPECT_EQ(g, 0.0);
}

TEST(NormActivationJoinGradcheck, Cat) {
  check_op("cat_dim0",
           [](auto& x) {
             return cat({x[0], x[1]}, 0);
           },
           {random_tensor({2, 3}, 29), random_tensor({1, 3}, 30)});
  check_op(
      "cat_dim1_three",
      [](auto& x) {
        return cat({x[0], x[1], x[2]}, 1);
      },
      {random_tensor({2, 1, 2}, 31), random_tensor({2, 3, 2}, 32), random_tensor({2, 2, 2}, 33)});
  check_op("cat_dim_-1",
           [](auto& x) {
             return cat({x[0], x[1]}, -1);
           },
           {random_tensor({2, 2}, 34), random_tensor({2, 3}, 35)});
  check_op("cat_same_tensor_twice",
           [](auto& x) {
             return cat({x[0], x[0]}, 0);
           },
           {random_tensor({2, 2}, 36)});
}

TEST(NormActivationJoinGradcheck, Stack) {
  check_op("stack_dim0",
           [](auto& x) {
             return stack({x[0], x[1]}, 0);
           },
           {random_tensor({2, 3}, 37), random_tensor({2, 3}, 38)});
  check_op("stack_dim1",
           [](auto& x) {
             return stack({x[0], x[1], x[2]}, 1);
           },
           {random_tensor({2, 3}, 39), random_tensor({2, 3}, 40), random_tensor({2, 3}, 41)});
  check_op("stack_last",
           [](auto& x) {
             return stack({x[0], x[1]}, -1);
           },
           {random_tensor({3}, 42), random_tensor({3}, 43)});
}

TEST(NormActivationJoinGradcheck, NormsComposedWithGeluAndCat) {
  // A transformer-ish block in miniature: layer_norm -> gelu -> cat with a skip -> pow.
  check_op("composed",
           [](auto& x) {
             Tensor h = gelu(layer_norm(x[0], {4}, x[1], x[2]));
             return pow(cat({h, x[0]}, 1), 2.0);
           },
           {random_tensor({3, 4}, 44), random_tensor({4}, 45, 0.5, 1.5), random_tensor({4}, 46)});
}

// Finite differences cannot check dropout (the mask changes on every call), so check the
// rule directly: d out / d x = mask / (1 - p), with the mask read off the forward output.
TEST(NormActivationJoinGradcheck, DropoutGradientIsMaskOverKeepProbability) {
  const double p = 0.25;
  manual_seed(7);
  Tensor x =
      random_tensor({8, 16}, 47, 0.5, 1.5).requires_grad_(true);  // nonzero: kept <=> out != 0
  Tensor out = dropout(x, p, true);
  const Tensor upstream = random_tensor({8, 16}, 48);
  out.backward(upstream);
  const std::vector<double> o = out.to_vector_f64(), xv = x.to_vector_f64(),
                            g = x.grad().to_vector_f64(), u = upstream.to_vector_f64();
  int kept = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    const bool keep = o[i] != 0.0;
    kept += keep;
    const double mask_over = keep ? 1.0 / (1.0 - p) : 0.0;
    // f64 throughout: the only rounding is one multiply each side.
    EXPECT_NEAR(g[i], u[i] * mask_over, 1e-15) << "element " << i;
    if (keep) EXPECT_NEAR(o[i], xv[i] / (1.0 - p), 1e-15) << "element " << i;
  }
  // A mask that kept everything or nothing would make the check above vacuous.
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, int(o.size()));
}

}  // namespace
}  // namespace mixprec
