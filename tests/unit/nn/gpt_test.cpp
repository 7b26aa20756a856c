// gpt_test.cpp: nn::Gpt (the byte-level language model): GPT-2's parameter names and the
// parameter count of the `gpt` preset computed by hand, logits [B, T, 256], weight tying
// (the head is the token embedding: one tensor, whose gradient collects both uses), no
// position seeing a later one, and a finite-difference check of a small Gpt's gradients in
// f64 (embedding, causal attention, layer norms, GELU MLP, residual adds, tied head).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/finite_diff.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"

namespace mixprec {
namespace {

using test::random_tensor;

TEST(Gpt, NamesShapesCountAndTying) {
  auto spec = nn::model_spec("gpt");
  ASSERT_TRUE(spec.is_ok());
  EXPECT_TRUE(spec->language_model);
  auto model = nn::make_model(*spec);
  std::map<std::string, Shape> shapes;
  int64_t n = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    shapes[name] = p.shape();
    n += p.numel();
  }
  EXPECT_EQ(shapes.at("wte.weight"), (Shape{256, 384}));
  EXPECT_EQ(shapes.at("wpe.weight"), (Shape{256, 384}));
  EXPECT_EQ(shapes.at("h.0.attn.in_proj_weight"), (Shape{1152, 384}));
  EXPECT_EQ(shapes.at("h.5.mlp.c_fc.weight"), (Shape{1536, 384}));
  EXPECT_EQ(shapes.at("h.5.mlp.c_proj.weight"), (Shape{384, 1536}));
  EXPECT_EQ(shapes.at("ln_f.weight"), (Shape{384}));
  EXPECT_EQ(shapes.count("lm_head.weight"), 0u);  // tied: the head is wte
  // Per block: ln 2x(2x384) + attention 3x384x384 + 3x384 + 384x384 + 384 + mlp 384x1536 +
  // 1536 + 1536x384 + 384; plus wte, wpe 2 x 256x384 and ln_f 2x384.
  const int64_t d = 384, block = 4 * d + 3 * d * d + 3 * d + d * d + d + d * 4 * d + 4 * d + 4 * d * d + d;
  EXPECT_EQ(n, 6 * block + 2 * 256 * d + 2 * d);
}

TEST(Gpt, LogitsShapeAndNoPositionSeesALaterOne) {
  nn::Gpt gpt(8, 2, 16, 2);
  const Tensor a = Tensor::from_vector_i64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6});
  const Tensor b = Tensor::from_vector_i64({1, 2, 3, 4, 5, 99, 7, 8, 9, 10, 11, 200}, {2, 6});
  const Tensor la = gpt(a), lb = gpt(b);
  ASSERT_EQ(la.shape(), (Shape{2, 6, 256}));
  const std::vector<double> va = la.to_vector_f64(), vb = lb.to_vector_f64();
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t t = 0; t < 6; ++t)
      for (int64_t v = 0; v < 256; ++v) {
        const size_t k = size_t((s * 6 + t) * 256 + v);
        if (t < 5) ASSERT_EQ(va[k], vb[k]) << "position " << t << " saw the last token";
      }
  EXPECT_NE(va[size_t(5 * 256)], vb[size_t(5 * 256)]);  // the last position did change
  EXPECT_THROW(gpt(Tensor::from_vector_i64(std::vector<int64_t>(9, 1), {1, 9})), Error);  // longer than context
}

// Generation with the key/value cache gives, token by token, the rows of the full forward.
TEST(Gpt, CachedStepsEqualTheFullForward) {
  nn::Gpt gpt(8, 2, 16, 2);
  const std::vector<int64_t> seq = {72, 101, 108, 108, 111, 32, 71};
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    gpt.to(dt);
    NoGradGuard ng;
    const std::vector<double> full =
        gpt(Tensor::from_vector_i64(seq, {1, int64_t(seq.size())})).to_vector_f64();
    nn::KvCache cache;
    double worst = 0, scale = 0;
    for (size_t t = 0; t < seq.size(); ++t) {
      const std::vector<double> step = gpt.forward_step(seq[t], cache).to_vector_f64();
      ASSERT_EQ(step.size(), 256u);
      for (size_t v = 0; v < 256; ++v) {
        worst = std::max(worst, std::fabs(step[v] - full[t * 256 + v]));
        scale = std::max(scale, std::fabs(full[t * 256 + v]));
      }
    }
    EXPECT_EQ(cache.length, int64_t(seq.size()));
    EXPECT_LT(worst, (dt == DType::f64 ? 1e-12 : 1e-5) * std::max(scale, 1.0));
  }
  nn::KvCache full_cache;
  full_cache.length = 8;
  EXPECT_THROW(gpt.forward_step(1, full_cache), Error);  // past the context
  nn::KvCache c;
  EXPECT_THROW(gpt.forward_step(256, c), Error);  // not a byte
}

TEST(Gpt, SmallGptGradientsMatchFiniteDifferencesInF64) {
  nn::Gpt gpt(/*context=*/3, /*layers=*/1, /*d_model=*/4, /*heads=*/2, /*vocab=*/5);
  gpt.to(DType::f64);
  uint64_t seed = 30;
  for (auto& [name, p] : gpt.named_parameters()) {
    Tensor t = p;
    const bool scale = name.find("ln") != std::string::npos && name.find("weight") != std::string::npos;
    t.copy_(random_tensor(p.shape(), seed++, scale ? 0.5 : -0.5, scale ? 1.5 : 0.5));
  }
  const Tensor tokens = Tensor::from_vector_i64({4, 1, 4, 0, 2, 2}, {2, 3});
  const Tensor weights = random_tensor({2, 3, 5}, 61);
  sum(mul(gpt(tokens), weights)).backward();
  auto loss = [&] {
    NoGradGuard ng;
    return test::dot_f64(gpt(tokens), weights);
  };
  int checked = 0;
  for (auto& [name, p] : gpt.named_parameters()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(test::gradients_match(p.grad(), test::numerical_gradient_in_place(loss, p), 1e-5));
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 12 + 2);  // wte, wpe; ln_1 (2), attn (4), ln_2 (2), mlp (4); ln_f (2)
}

}  // namespace
}  // namespace mixprec
