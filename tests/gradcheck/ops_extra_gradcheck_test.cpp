// ops_extra_gradcheck_test.cpp: layer_norm, batch_norm, gelu, pow, cat, stack through the
// public API and the autograd engine, against central finite differences in float64; and
// dropout's gradient against its own mask (finite differences cannot see a random mask).
// Loss used: L = sum(op(inputs) * R) with a fixed random R, so every output element
// contributes with a different weight (a plain sum would make layer_norm's input
// gradient identically zero).
#include <gtest/gtest.h>

#include <functional>

#include "common/autograd_check.h"
#include "mixprec/autograd.h"
#include "mixprec/ops.h"
#include "mixprec/ops_extra.h"

namespace mixprec {
namespace {

using test::random_tensor;
using test::check_op;

TEST(OpsExtraGradcheck, LayerNormInputWeightBias) {
  check_op("layer_norm_last_dim", [](auto& x) { return layer_norm(x[0], {5}, x[1], x[2]); },
           {random_tensor({3, 5}, 1), random_tensor({5}, 2, 0.5, 1.5), random_tensor({5}, 3)});
  check_op(
      "layer_norm_last_two_dims",
      [](auto& x) {
        return layer_norm(x[0], {3, 4}, x[1], x[2], 1e-3);
      },
      {random_tensor({2, 3, 4}, 4), random_tensor({3, 4}, 5, 0.5, 1.5), random_tensor({3, 4}, 6)});
}

TEST(OpsExtraGradcheck, LayerNormWithoutAffine) {
  check_op("layer_norm_no_affine", [](auto& x) { return layer_norm(x[0], {6}); },
           {random_tensor({4, 6}, 7)});
}

TEST(OpsExtraGradcheck, BatchNormTrainingInputWeightBias) {
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

TEST(OpsExtraGradcheck, BatchNormTrainingChannelsLast) {
  check_op(
      "batch_norm_channels_last",
      [](auto& x) {
        return batch_norm(x[0].to_memory_format(MemoryFormat::channels_last), Tensor(), Tensor(),
                          x[1], x[2], true);
      },
      {random_tensor({2, 3, 2, 2}, 14), random_tensor({3}, 15, 0.5, 1.5), random_tensor({3}, 16)});
}

TEST(OpsExtraGradcheck, BatchNormEvalUsesFixedRunningStats) {
  const Tensor rm = random_tensor({3}, 17), rv = random_tensor({3}, 18, 0.5, 2.0);
  check_op(
      "batch_norm_eval", [&](auto& x) { return batch_norm(x[0], rm, rv, x[1], x[2], false); },
      {random_tensor({2, 3, 2, 2}, 19), random_tensor({3}, 20, 0.5, 1.5), random_tensor({3}, 21)});
}

TEST(OpsExtraGradcheck, BatchNormWithoutAffine) {
  check_op("batch_norm_no_affine",
           [](auto& x) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
           {random_tensor({5, 2}, 22)});
}

TEST(OpsExtraGradcheck, Gelu) {
  check_op("gelu", [](auto& x) { return gelu(x[0]); }, {random_tensor({3, 4}, 23, -3.0, 3.0)});
}

TEST(OpsExtraGradcheck, Pow) {
  check_op("pow_3", [](auto& x) { return pow(x[0], 3.0); }, {random_tensor({6}, 24)});
  check_op("pow_2", [](auto& x) { return pow(x[0], 2.0); }, {random_tensor({2, 3}, 25)});
  // Fractional and negative exponents need positive bases.
  check_op("pow_2.5", [](auto& x) { return pow(x[0], 2.5); }, {random_tensor({5}, 26, 0.5, 2.0)});
  check_op("pow_-1.5", [](auto& x) { return pow(x[0], -1.5); }, {random_tensor({5}, 27, 0.5, 2.0)});
}

TEST(OpsExtraGradcheck, PowZeroExponentHasZeroGradient) {
  Tensor x = random_tensor({4}, 28).requires_grad_(true);
  sum(pow(x, 0.0)).backward();
  for (double g : x.grad().to_vector_f64()) EXPECT_EQ(g, 0.0);
}

TEST(OpsExtraGradcheck, Cat) {
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

TEST(OpsExtraGradcheck, Stack) {
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

TEST(OpsExtraGradcheck, NormsComposedWithGeluAndCat) {
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
TEST(OpsExtraGradcheck, DropoutGradientIsMaskOverKeepProbability) {
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
