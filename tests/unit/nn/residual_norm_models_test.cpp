// residual_norm_models_test.cpp: the models that run their residual adds and LayerNorms as
// add_layer_norm (Gpt, GptBlock, TransformerEncoderLayer) against the unfused route written
// out here from the same modules (add, then the LayerNorm module, then the next layer's own
// autocast cast), under bf16 autocast and in f32: logits / outputs and every parameter's
// gradient must be the same bits, and a few optimizer steps must give the same losses.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/tensor_checks.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"
#include "mixprec/nn/nn_attention.h"
#include "mixprec/optim/optim.h"

namespace mixprec {
namespace {

// Gpt::forward as it was before the fusion: each block add(x, attn(ln_1(x))), add(y,
// mlp(ln_2(y))), then ln_f and the tied head.
Tensor unfused_gpt(nn::Gpt& m, const Tensor& tokens) {
  const int64_t B = tokens.size(0), T = tokens.size(1);
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = t;
  Tensor x = add((*m.wte)(tokens), (*m.wpe)(Tensor::from_vector_i64(pos, {T})));
  for (const auto& [name, module] : m.h->children()) {
    auto& b = static_cast<nn::GptBlock&>(*module);
    const Tensor y = add(x, (*b.attn)((*b.ln_1)(x)));
    x = add(y, (*b.mlp)((*b.ln_2)(y)));
  }
  x = (*m.ln_f)(x);
  const int64_t d = x.size(2);
  return reshape(linear(reshape(x, {B * T, d}), m.wte->weight), {B, T, m.wte->weight.size(0)});
}

Tensor unfused_encoder(nn::TransformerEncoderLayer& l, const Tensor& x) {
  const Tensor h = (*l.norm1)(add(x, (*l.dropout1)((*l.self_attn)(x))));
  Tensor ff = linear_over_tokens(*l.linear1, h);
  ff = l.activation == nn::Activation::gelu ? gelu(ff) : relu(ff);
  ff = linear_over_tokens(*l.linear2, (*l.dropout)(ff));
  return (*l.norm2)(add(h, (*l.dropout2)(ff)));
}

struct Pass {
  Tensor out;
  std::map<std::string, Tensor> grads;
};

// One forward (under autocast when ac is set) and a backward of a fixed weighted sum.
Pass run(nn::Module& m, std::optional<DType> ac, const std::function<Tensor()>& forward, uint64_t seed) {
  for (auto& [name, p] : m.named_parameters()) p.set_grad(Tensor());
  Pass r;
  {
    std::optional<amp::AutocastGuard> g;
    if (ac) g.emplace(*ac);
    r.out = forward();
  }
  manual_seed(seed);
  const Tensor weights = Tensor::normal(r.out.shape(), 0.0, 1.0, r.out.dtype());
  sum(mul(r.out, weights)).backward();
  for (auto& [name, p] : m.named_parameters()) r.grads[name] = p.grad();
  return r;
}

void expect_same(const Pass& a, const Pass& b) {
  EXPECT_TRUE(test::bits_equal(a.out, b.out)) << "output";
  for (const auto& [name, g] : a.grads) {
    ASSERT_TRUE(g.defined() && b.grads.at(name).defined()) << name;
    EXPECT_TRUE(test::bits_equal(g, b.grads.at(name))) << name;
  }
}

Tensor tokens(int64_t B, int64_t T, uint64_t seed) {
  std::vector<int64_t> v(size_t(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 37 + seed * 11) % 256);
  return Tensor::from_vector_i64(v, {B, T});
}

TEST(ResidualNormModels, GptIsTheUnfusedRouteBitForBit) {
  manual_seed(1);
  nn::Gpt m(/*context=*/24, /*layers=*/3, /*d_model=*/40, /*heads=*/4, /*vocab=*/256);
  const Tensor t = tokens(3, 24, 2);
  for (std::optional<DType> ac : {std::optional<DType>(DType::bf16), std::optional<DType>()}) {
    SCOPED_TRACE(ac ? "bf16 autocast" : "f32");
    const Pass fused = run(m, ac, [&] { return m.forward(t); }, 5);
    const Pass plain = run(m, ac, [&] { return unfused_gpt(m, t); }, 5);
    expect_same(fused, plain);
  }
}

TEST(ResidualNormModels, GptBlockForwardIsTheUnfusedBlock) {
  manual_seed(3);
  nn::GptBlock b(32, 2);
  const Tensor x = Tensor::normal({2, 16, 32}, 0.0, 1.0);
  const auto plain = [&] {
    const Tensor y = add(x, (*b.attn)((*b.ln_1)(x)));
    return add(y, (*b.mlp)((*b.ln_2)(y)));
  };
  expect_same(run(b, DType::bf16, [&] { return b.forward(x); }, 6), run(b, DType::bf16, plain, 6));
}

TEST(ResidualNormModels, EncoderLayerIsTheUnfusedRouteBitForBit) {
  manual_seed(4);
  nn::TransformerEncoderLayer l(48, 4, 96, /*dropout=*/0.0, nn::Activation::gelu);
  const Tensor x = Tensor::normal({3, 20, 48}, 0.0, 1.0);
  for (std::optional<DType> ac : {std::optional<DType>(DType::bf16), std::optional<DType>()}) {
    SCOPED_TRACE(ac ? "bf16 autocast" : "f32");
    expect_same(run(l, ac, [&] { return l.forward(x); }, 7), run(l, ac, [&] { return unfused_encoder(l, x); }, 7));
  }
}

TEST(ResidualNormModels, GptTrainsToTheSameLossesUnderAutocast) {
  // Five AdamW steps from the same weights along each route: the same losses, bit for bit.
  std::vector<double> losses[2];
  for (int route = 0; route < 2; ++route) {
    manual_seed(9);
    nn::Gpt m(16, 2, 32, 2, 256);
    optim::AdamOptions o = optim::AdamW::defaults();
    o.lr = 1e-2;
    optim::AdamW opt(m.parameters(), o);
    const Tensor t = tokens(4, 16, 3);
    const Tensor target = tokens(4, 16, 4).reshape({64});
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard ac(DType::bf16);
        const Tensor logits = route == 0 ? m.forward(t) : unfused_gpt(m, t);
        loss = cross_entropy(reshape(logits, {64, 256}), target);
      }
      loss.backward();
      opt.step();
      losses[route].push_back(loss.item());
    }
  }
  for (int step = 0; step < 5; ++step) EXPECT_EQ(losses[0][size_t(step)], losses[1][size_t(step)]) << step;
  EXPECT_LT(losses[0].back(), losses[0].front());
}

}  // namespace
}  // namespace mixprec
