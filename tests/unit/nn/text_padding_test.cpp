// text_padding_test.cpp: a text classifier's padding masked (model files' `embedding:
// {mask_padding: true}`): a text's logits do not depend on how many padding bytes follow it
// (and do without the mask), a text of padding only gives finite logits, the masked model's
// gradients match finite differences in f64 (the masked scores and the masked mean), and the
// mask is refused in a language model.
#include <gtest/gtest.h>

#include <cmath>

#include "common/finite_diff.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/nn_attention.h"

namespace mixprec::nn {
namespace {

std::string classifier(bool mask) {
  return std::string("layers:\n  - embedding: {dim: 8, context: 32") + (mask ? ", mask_padding: true" : "") +
         "}\n  - encoder: {heads: 2, ffn: 16, dropout: 0}\n  - global_avgpool\n  - linear: {out: classes}\n";
}

// The model for texts of T bytes, with the weights of `like` when given.
std::shared_ptr<Module> build(bool mask, int64_t T, const std::shared_ptr<Module>& like = nullptr) {
  manual_seed(3);
  auto m = build_model_file(classifier(mask), "c.yaml", 1, 1, T, 3, nullptr, kMaxModelFileParameters, true);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  if (like) {
    NoGradGuard ng;
    const auto a = (*m)->named_parameters(), b = like->named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      Tensor dst = a[i].second;
      dst.copy_(b[i].second);
    }
  }
  (*m)->eval();
  return *m;
}

Tensor padded(const std::string& text, int64_t T, int64_t copies = 1) {
  std::vector<int64_t> ids(size_t(copies * T), 0);
  for (int64_t c = 0; c < copies; ++c)
    for (size_t i = 0; i < text.size(); ++i) ids[size_t(c * T) + i] = static_cast<unsigned char>(text[i]);
  return Tensor::from_vector_i64(ids, {copies, T});
}

double max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector_f64(), y = b.to_vector_f64();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

TEST(TextPadding, LogitsDoNotDependOnThePaddingWhenMasked) {
  const std::string text = "hello world";
  for (bool mask : {true, false}) {
    SCOPED_TRACE(mask ? "mask_padding" : "no mask");
    auto exact = build(mask, 11);  // no padding at all
    auto t16 = build(mask, 16, exact), t32 = build(mask, 32, exact);
    NoGradGuard ng;
    const Tensor y11 = (*exact)(padded(text, 11)), y16 = (*t16)(padded(text, 16)), y32 = (*t32)(padded(text, 32));
    if (mask) {
      EXPECT_LT(max_difference(y11, y16), 1e-5);
      EXPECT_LT(max_difference(y11, y32), 1e-5);
    } else {
      EXPECT_GT(max_difference(y11, y32), 1e-4);  // padding attended to and averaged in
    }
  }
}

TEST(TextPadding, MaskedUnderAutocastAndForPaddingOnly) {
  auto a = build(true, 16);
  auto b = build(true, 32, a);
  NoGradGuard ng;
  amp::AutocastGuard autocast(DType::bf16);
  const Tensor y16 = (*a)(padded("a short text", 16)), y32 = (*b)(padded("a short text", 32));
  EXPECT_LT(max_difference(y16, y32), 2e-2);  // bf16 products, different lengths
  const std::vector<double> empty = (*b)(padded("", 32, 2)).to_vector_f64();
  for (double v : empty) EXPECT_TRUE(std::isfinite(v));
}

TEST(TextPadding, MaskedGradientsMatchFiniteDifferencesInF64) {
  auto m = build(true, 5);
  m->to(DType::f64);
  m->train();
  uint64_t seed = 40;
  for (auto& [name, p] : m->named_parameters()) {
    Tensor t = p;
    const bool norm = name.find("norm") != std::string::npos && name.find("weight") != std::string::npos;
    t.copy_(test::random_tensor(p.shape(), seed++, norm ? 0.5 : -0.5, norm ? 1.5 : 0.5));
  }
  // Two texts: 3 real bytes + 2 padding, and 5 real bytes.
  const Tensor ids = Tensor::from_vector_i64({7, 200, 31, 0, 0, 1, 2, 3, 4, 5}, {2, 5});
  const Tensor weights = test::random_tensor({2, 3}, 77);
  sum(mul((*m)(ids), weights)).backward();
  auto loss = [&] {
    NoGradGuard ng;
    return test::dot_f64((*m)(ids), weights);
  };
  int checked = 0;
  for (auto& [name, p] : m->named_parameters()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(test::gradients_match(p.grad(), test::numerical_gradient_in_place(loss, p), 1e-5));
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 12 + 2);  // embedding (2), encoder (12), head (2)
}

TEST(TextPadding, RefusedInALanguageModel) {
  auto m = build_model_file("layers: [{embedding: {dim: 8, mask_padding: true}}, decoder, lm_head]\n", "lm.yaml", 1, 1,
                            8, 256, nullptr, kMaxModelFileParameters, true);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("a language model's windows of text have no padding"), std::string::npos);
}

}  // namespace
}  // namespace mixprec::nn
