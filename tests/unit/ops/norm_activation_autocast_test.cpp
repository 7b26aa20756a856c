// norm_activation_autocast_test.cpp: the autocast dtypes of layer_norm, batch_norm, pow, gelu,
// dropout, cat and stack (bit-identity with a manual cast), and their error messages.
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

// batch_norm's input [2, 2, 1, 3] (as in norm_test.cpp)
const std::vector<double> kBnInput = {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60};

// ---- autocast ----

TEST(NormActivationAutocast, LayerNormReturnsF32AndMatchesAManualCast) {
  const Tensor x = Tensor::uniform({4, 6}, -2, 2, DType::bf16);
  const Tensor w = Tensor::uniform({6}, 0.5, 1.5), b = Tensor::uniform({6}, -1, 1);
  Tensor ln;
  {
    amp::AutocastGuard g(DType::bf16);
    ln = layer_norm(x, {6}, w, b);
  }
  EXPECT_EQ(ln.dtype(), DType::f32);
  EXPECT_TRUE(bits_equal(ln, layer_norm(x.to(DType::f32), {6}, w, b)));
}

// batch_norm and pow keep a bf16 input's dtype under autocast, as PyTorch's CPU autocast
// does (docs/amp.md): the same bits as without autocast, running stats updated the same.
TEST(NormActivationAutocast, BatchNormAndPowKeepBf16AsPyTorch) {
  const Tensor x = Tensor::uniform({4, 6}, -2, 2, DType::bf16);
  const Tensor x4 = Tensor::uniform({2, 3, 2, 2}, -2, 2, DType::bf16);
  const Tensor bw = Tensor::uniform({3}, 0.5, 1.5), bb = Tensor::uniform({3}, -1, 1);
  Tensor rm_auto = Tensor::zeros({3}), rv_auto = Tensor::ones({3});
  Tensor rm_ref = Tensor::zeros({3}), rv_ref = Tensor::ones({3});
  Tensor bn, pw;
  {
    amp::AutocastGuard g(DType::bf16);
    bn = batch_norm(x4, rm_auto, rv_auto, bw, bb, true);
    pw = pow(x, 3.0);
  }
  EXPECT_EQ(bn.dtype(), DType::bf16);
  EXPECT_EQ(pw.dtype(), DType::bf16);
  EXPECT_TRUE(bits_equal(bn, batch_norm(x4, rm_ref, rv_ref, bw, bb, true)));
  EXPECT_TRUE(bits_equal(rm_auto, rm_ref));
  EXPECT_TRUE(bits_equal(rv_auto, rv_ref));
  EXPECT_TRUE(bits_equal(pw, pow(x, 3.0)));
  EXPECT_EQ(rm_auto.dtype(), DType::f32);
}

TEST(NormActivationAutocast, KeepOpsStayInTheInputDtype) {
  const Tensor x = Tensor::uniform({5, 7}, -3, 3, DType::bf16);
  Tensor ge, dr;
  {
    amp::AutocastGuard g(DType::bf16);
    ge = gelu(x);
    manual_seed(11);
    dr = dropout(x, 0.4, true);
  }
  EXPECT_EQ(ge.dtype(), DType::bf16);
  EXPECT_EQ(dr.dtype(), DType::bf16);
  EXPECT_TRUE(bits_equal(ge, gelu(x)));
  manual_seed(11);
  EXPECT_TRUE(bits_equal(dr, dropout(x, 0.4, true)));
}

TEST(NormActivationAutocast, CatAndStackPromoteToTheWidest) {
  const Tensor a = Tensor::uniform({2, 3}, -1, 1, DType::bf16), b = Tensor::uniform({2, 3}, -1, 1);
  const Tensor h = Tensor::uniform({2, 3}, -1, 1, DType::f16);
  Tensor c, s, hb;
  {
    amp::AutocastGuard g(DType::bf16);
    c = cat({a, b}, 0);
    s = stack({a, b}, 1);
    hb = cat({h, a}, 1);  // f16 with bf16: neither holds the other, so f32
  }
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_EQ(hb.dtype(), DType::f32);
  EXPECT_TRUE(bits_equal(c, cat({a.to(DType::f32), b}, 0)));
  EXPECT_TRUE(bits_equal(s, stack({a.to(DType::f32), b}, 1)));
}

TEST(NormActivationAutocast, F64IsNeverCast) {
  const Tensor x = f64({1, 2, 3, 4}, {1, 4});
  amp::AutocastGuard g(DType::bf16);
  EXPECT_EQ(layer_norm(x, {4}).dtype(), DType::f64);
  EXPECT_EQ(pow(x, 2.0).dtype(), DType::f64);
  EXPECT_EQ(gelu(x).dtype(), DType::f64);
}

TEST(NormActivationAutocast, BackwardReachesEachLeafInItsOwnDtype) {
  Tensor x = Tensor::uniform({3, 4}, -1, 1, DType::bf16).requires_grad_(true);
  Tensor w = Tensor::ones({4}).requires_grad_(true), b = Tensor::zeros({4}).requires_grad_(true);
  Tensor y;
  {
    amp::AutocastGuard g(DType::bf16);
    y = sum(mul(layer_norm(x, {4}, w, b), Tensor::uniform({3, 4}, -1, 1)));
  }
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
}

// ---- errors ----

TEST(NormActivationErrors, ShapeErrorsNameTheOpAndShapes) {
  const Tensor x = Tensor::zeros({2, 3});
  std::string m = error_of([&] { layer_norm(x, {4}); });
  EXPECT_NE(m.find("layer_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  m = error_of([&] { layer_norm(x, {3}, Tensor::ones({2})); });
  EXPECT_NE(m.find("layer_norm: weight [2]"), std::string::npos) << m;
  m = error_of([&] { batch_norm(x, Tensor(), Tensor(), Tensor::ones({4}), Tensor(), true); });
  EXPECT_NE(m.find("batch_norm: weight [4]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  m = error_of(
      [&] { batch_norm(Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true); });
  EXPECT_NE(m.find("batch_norm"), std::string::npos) << m;
  m = error_of([&] {
    batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
  });
  EXPECT_NE(m.find("more than 1 value per channel"), std::string::npos) << m;
  m = error_of([&] { batch_norm(x, Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), false); });
  EXPECT_NE(m.find("running_var"), std::string::npos) << m;
  m = error_of([&] { cat({x, Tensor::zeros({3, 3})}, 1); });
  EXPECT_NE(m.find("cat: tensor 1 has shape [3, 3] but tensor 0 has [2, 3]"), std::string::npos)
      << m;
  m = error_of([&] { cat({x}, 2); });
  EXPECT_NE(m.find("cat: dim 2 out of range"), std::string::npos) << m;
  m = error_of([&] { cat({}, 0); });
  EXPECT_NE(m.find("cat"), std::string::npos) << m;
  m = error_of([&] { stack({x, Tensor::zeros({3, 2})}, 0); });
  EXPECT_NE(m.find("stack: tensor 1 has shape [3, 2] but tensor 0 has [2, 3]"), std::string::npos)
      << m;
  m = error_of([&] { stack({x}, 3); });
  EXPECT_NE(m.find("stack: dim 3 out of range"), std::string::npos) << m;
}

TEST(NormActivationErrors, BadArgumentsAreRejected) {
  const Tensor i = Tensor::from_vector_i64({1, 2}, {2});
  EXPECT_NE(error_of([&] { pow(i, 2.0); }).find("pow: needs a floating tensor"), std::string::npos);
  EXPECT_NE(error_of([&] { gelu(i); }).find("gelu: needs a floating tensor"), std::string::npos);
  EXPECT_NE(error_of([&] { dropout(Tensor::ones({2}), 1.0); }).find("dropout: p must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dropout(Tensor::ones({2}), -0.1); }).find("dropout: p"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { layer_norm(Tensor::ones({2}), {2}, Tensor(), Tensor(), -1.0); }).find("eps"),
      std::string::npos);
}

}  // namespace
}  // namespace mixprec
