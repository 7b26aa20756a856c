// gpt.cpp: GptBlock and the byte-level Gpt language model (models.h), composed of public
// ops: embedding, causal multi-head attention, linear, gelu, and the residual adds with the
// LayerNorms that read them as add_layer_norm (nn/residual_norm.h).
#include <cmath>
#include <tuple>

#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"
#include "nn/residual_norm.h"

namespace mixprec::nn {

namespace {

void fill_normal(Tensor& t, double stddev) { t.copy_(Tensor::normal(t.shape(), 0.0, stddev, t.dtype())); }

}  // namespace

GptMlp::GptMlp(int64_t d_model) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(d_model, 4 * d_model));
  c_proj = register_module("c_proj", std::make_shared<Linear>(4 * d_model, d_model));
}

Tensor GptMlp::forward(const Tensor& x) { return linear_over_tokens(*c_proj, gelu(linear_over_tokens(*c_fc, x))); }

GptBlock::GptBlock(int64_t d_model, int64_t heads) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{d_model}));
  attn = register_module("attn", std::make_shared<MultiheadAttention>(d_model, heads, 0.0, true, /*causal=*/true));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{d_model}));
  mlp = register_module("mlp", std::make_shared<GptMlp>(d_model));
}

Tensor GptBlock::forward(const Tensor& x) {
  const auto [stream, branch] = forward_residual(x, Tensor());
  return add(stream, branch);
}

std::pair<Tensor, Tensor> GptBlock::forward_residual(const Tensor& x, const Tensor& pending) {
  // ln_1 reads x + pending and ln_2 x + pending + attention; each add runs with its norm,
  // which writes its output in the dtype the next GEMM reads (bf16 under autocast).
  const ResidualLayerNorm r1 = residual_norm(x, pending, *ln_1, /*gemm_next=*/true);
  const ResidualLayerNorm r2 = residual_norm(r1.sum, (*attn)(r1.normed), *ln_2, /*gemm_next=*/true);
  return {r2.sum, (*mlp)(r2.normed)};
}

Tensor GptBlock::forward_step(const Tensor& x, Tensor& key_cache, Tensor& value_cache) {
  const int64_t d = x.size(1);
  const Tensor y = add(x, attn->forward_step((*ln_1)(x), key_cache, value_cache));
  return add(y, reshape((*mlp)(reshape((*ln_2)(y), {1, 1, d})), {1, d}));  // the MLP runs over [B, T, d]
}

void init_gpt2_block(GptBlock& block, int64_t layers) {
  NoGradGuard no_grad;
  fill_normal(block.attn->in_proj_weight, 0.02);
  fill_normal(block.mlp->c_fc->weight, 0.02);
  fill_normal(block.attn->out_proj->weight, 0.02 / std::sqrt(2.0 * double(layers)));
  fill_normal(block.mlp->c_proj->weight, 0.02 / std::sqrt(2.0 * double(layers)));
  for (Tensor* b : {&block.mlp->c_fc->bias, &block.mlp->c_proj->bias}) b->fill_(0.0);
}

Gpt::Gpt(int64_t context_, int64_t layers, int64_t d_model, int64_t heads, int64_t vocab) : context(context_) {
  if (context < 1 || layers < 1 || d_model < 1 || heads < 1 || vocab < 1 || d_model % heads != 0)
    throw Error(Status::invalid_argument("Gpt: context " + std::to_string(context) + ", layers " +
                                         std::to_string(layers) + ", d_model " + std::to_string(d_model) +
                                         ", heads " + std::to_string(heads) +
                                         ": all must be >= 1 and d_model divisible by heads"));
  wte = register_module("wte", std::make_shared<Embedding>(vocab, d_model));
  wpe = register_module("wpe", std::make_shared<Embedding>(context, d_model));
  h = register_module("h", std::make_shared<Sequential>());
  for (int64_t i = 0; i < layers; ++i) h->add(std::make_shared<GptBlock>(d_model, heads));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(Shape{d_model}));
  // GPT-2's initialisation: N(0, 0.02) everywhere, the residual projections scaled down by
  // sqrt(2 layers) so the residual stream's variance does not grow with depth.
  fill_normal(wte->weight, 0.02);
  fill_normal(wpe->weight, 0.01);
  for (const auto& [name, module] : h->children()) init_gpt2_block(static_cast<GptBlock&>(*module), layers);
}

Tensor Gpt::forward(const Tensor& tokens) {
  if (tokens.dim() != 2 || tokens.size(1) < 1 || tokens.size(1) > context)
    throw Error(Status::invalid_argument("Gpt: tokens " + shape_str(tokens.shape()) +
                                         ": expected [batch, T] with 1 <= T <= context " + std::to_string(context)));
  const int64_t B = tokens.size(0), T = tokens.size(1);
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = t;
  Tensor x = add((*wte)(tokens), (*wpe)(Tensor::from_vector_i64(pos, {T})));  // [B, T, d] + [T, d]
  // Block by block, each block's last residual add left to the next block's first norm (and
  // the last one to ln_f): one pass per add and norm. A block with an autocast override of
  // its own runs through operator(), which honours it.
  Tensor pending;
  for (const auto& [name, module] : h->children()) {
    auto& block = static_cast<GptBlock&>(*module);
    if (block.autocast_override()) {
      x = block(pending.defined() ? add(x, pending) : x);
      pending = Tensor();
    } else {
      std::tie(x, pending) = block.forward_residual(x, pending);
    }
  }
  x = residual_norm(x, pending, *ln_f, /*gemm_next=*/true).normed;
  const int64_t d = x.size(2);
  // The head is the token embedding, transposed (weight tying): [B*T, d] x [d, vocab].
  return reshape(linear(reshape(x, {B * T, d}), wte->weight), {B, T, wte->weight.size(0)});
}

void check_next_token(int64_t token, int64_t vocab, const KvCache& cache, int64_t context) {
  if (token < 0 || token >= vocab)
    throw Error(Status::invalid_argument("forward_step: token " + std::to_string(token) + " is not in [0, " +
                                         std::to_string(vocab) + ")"));
  if (cache.length >= context)
    throw Error(Status::invalid_argument("forward_step: the cache holds " + std::to_string(cache.length) +
                                         " positions, the model's whole context: start a new cache"));
}

Tensor Gpt::forward_step(int64_t token, KvCache& cache) {
  const int64_t vocab = wte->weight.size(0);
  check_next_token(token, vocab, cache, context);
  NoGradGuard no_grad;
  const int64_t layers = int64_t(h->children().size());
  cache.keys.resize(size_t(layers));
  cache.values.resize(size_t(layers));
  Tensor x = add((*wte)(Tensor::from_vector_i64({token}, {1})), (*wpe)(Tensor::from_vector_i64({cache.length}, {1})));
  for (int64_t l = 0; l < layers; ++l) {
    auto* block = static_cast<GptBlock*>(h->children()[size_t(l)].second.get());
    x = block->forward_step(x, cache.keys[size_t(l)], cache.values[size_t(l)]);
  }
  ++cache.length;
  return reshape(linear((*ln_f)(x), wte->weight), {vocab});
}

}  // namespace mixprec::nn
