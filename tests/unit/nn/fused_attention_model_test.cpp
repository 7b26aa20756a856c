// fused_attention_model_test.cpp: the models on the fused attention (the default) against the
// same models on the unfused route (MultiheadAttention::set_fused_from), end to end: gpt-tiny's
// (4 layers x 128 wide, 4 heads, 128 positions) training losses over a few Adam steps in f32
// and under bf16 autocast, and a padded encoder's outputs and gradients with the key padding
// mask (the text classifiers' route) in f32 and bf16; and generation's cached steps against
// the fused full forward.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/finite_diff.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"
#include "mixprec/nn/nn_attention.h"
#include "mixprec/ops/ops.h"
#include "mixprec/optim/optim.h"

namespace mixprec {
namespace {

// Selects the fused (or the unfused) route for the life of the guard.
struct AttentionRoute {
  explicit AttentionRoute(bool fused)
      : before(nn::MultiheadAttention::set_fused_from(fused ? 1 : int64_t(1) << 40)) {}
  ~AttentionRoute() { nn::MultiheadAttention::set_fused_from(before); }
  int64_t before;
};

// Batches of 4 windows of 129 bytes of a fixed text: 128 inputs, 128 next-byte targets.
std::pair<Tensor, Tensor> batch(int step) {
  const std::string text =
      "In the beginning God created the heaven and the earth. And the earth was without form, and void; "
      "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. ";
  std::vector<int64_t> x, y;
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 128; ++t) {
      const size_t at = size_t(step * 37 + b * 61 + t);
      x.push_back(int64_t(uint8_t(text[at % text.size()])));
      y.push_back(int64_t(uint8_t(text[(at + 1) % text.size()])));
    }
  return {Tensor::from_vector_i64(x, {4, 128}), Tensor::from_vector_i64(y, {4 * 128})};
}

std::vector<double> gpt_tiny_losses(bool fused, bool bf16, int steps) {
  AttentionRoute route(fused);
  manual_seed(42);
  nn::Gpt gpt(128, 4, 128, 4);
  optim::Adam opt(gpt.parameters(), optim::AdamOptions{1e-3});
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    const auto [x, y] = batch(s);
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(DType::bf16, bf16);
      loss = cross_entropy(reshape(gpt(x), {4 * 128, 256}), y);
    }
    loss.backward();
    opt.step();
    losses.push_back(loss.to_vector_f64()[0]);
  }
  return losses;
}

TEST(FusedAttentionModels, GptTinyTrainingLossesMatchTheUnfusedRoute) {
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "amp-bf16" : "fp32");
    const std::vector<double> fused = gpt_tiny_losses(true, bf16, 4), unfused = gpt_tiny_losses(false, bf16, 4);
    ASSERT_EQ(fused.size(), unfused.size());
    // f32: both routes sum in f32 in different orders (~1e-6 relative per step). bf16: the
    // unfused route rounds scores and probabilities to bf16, the fused one keeps them in
    // f32; over 4 steps the losses (~5.5) stay within ~1% of each other.
    for (size_t s = 0; s < fused.size(); ++s)
      EXPECT_NEAR(fused[s], unfused[s], (bf16 ? 1e-2 : 1e-4) * std::fabs(unfused[s])) << "step " << s;
    EXPECT_LT(fused.back(), fused.front());  // it trains
  }
}

TEST(FusedAttentionModels, GenerationsCachedStepsEqualTheFusedFullForward) {
  // generate's key/value-cache steps (unfused products over the cache) give, token by token,
  // the rows of the full forward on the fused route.
  AttentionRoute route(true);
  nn::Gpt gpt(8, 2, 16, 2);
  const std::vector<int64_t> seq = {72, 101, 108, 108, 111, 32, 71};
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    gpt.to(dt);
    NoGradGuard ng;
    const std::vector<double> full = gpt(Tensor::from_vector_i64(seq, {1, int64_t(seq.size())})).to_vector_f64();
    nn::KvCache cache;
    double worst = 0, scale = 1;
    for (size_t t = 0; t < seq.size(); ++t) {
      const std::vector<double> step = gpt.forward_step(seq[t], cache).to_vector_f64();
      for (size_t v = 0; v < 256; ++v) {
        worst = std::max(worst, std::fabs(step[v] - full[t * 256 + v]));
        scale = std::max(scale, std::fabs(full[t * 256 + v]));
      }
    }
    EXPECT_LT(worst, (dt == DType::f64 ? 1e-12 : 1e-5) * scale);
  }
}

TEST(FusedAttentionModels, PaddedEncoderMatchesTheUnfusedRoute) {
  // A TransformerEncoderLayer with a key padding mask (text classifiers): 3 texts of 40
  // positions, padded from 25, from 8, and not at all.
  constexpr int64_t B = 3, S = 40, E = 32;
  std::vector<int64_t> ids(size_t(B * S), 65);
  for (int64_t j = 25; j < S; ++j) ids[size_t(0 * S + j)] = 0;
  for (int64_t j = 8; j < S; ++j) ids[size_t(1 * S + j)] = 0;
  const Tensor mask = nn::key_padding_mask(Tensor::from_vector_i64(ids, {B, S}));
  manual_seed(7);
  nn::TransformerEncoderLayer layer(E, 4, 64);
  const Tensor x = test::random_tensor({B, S, E}, 71).to(DType::f32), dir = test::random_tensor({B, S, E}, 72);
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "f32");
    std::vector<double> outs[2], grads[2];
    for (int r = 0; r < 2; ++r) {
      AttentionRoute route(r == 0);
      layer.zero_grad();
      Tensor xi = x.clone().requires_grad_(true);
      Tensor out;
      {
        amp::AutocastGuard autocast(DType::bf16, bf16);
        out = layer.forward(xi, mask);
      }
      sum(mul(out, dir.to(out.dtype()))).backward();
      outs[r] = out.to_vector_f64();
      grads[r] = xi.grad().to_vector_f64();
      for (const Tensor& p : layer.parameters()) {
        const auto g = p.grad().to_vector_f64();
        grads[r].insert(grads[r].end(), g.begin(), g.end());
      }
    }
    double worst_out = 0, worst_grad = 0, scale = 1;
    for (size_t i = 0; i < outs[0].size(); ++i) worst_out = std::max(worst_out, std::fabs(outs[0][i] - outs[1][i]));
    for (size_t i = 0; i < grads[0].size(); ++i) {
      worst_grad = std::max(worst_grad, std::fabs(grads[0][i] - grads[1][i]));
      scale = std::max(scale, std::fabs(grads[1][i]));
    }
    // Outputs are LayerNorm'd (O(1)).
    EXPECT_LT(worst_out, bf16 ? 5e-2 : 1e-5);
    EXPECT_LT(worst_grad, (bf16 ? 5e-2 : 1e-5) * scale);
  }
}

}  // namespace
}  // namespace mixprec
