// sequence_layers.cpp: the layers of a text classifier over byte tokens (nn_sequence.h):
// the token + position embedding and the mean over positions.
#include <vector>

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/nn_sequence.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

Tensor mean_over_positions(const Tensor& x) {
  if (x.dim() != 3)
    throw Error(Status::invalid_argument("mean over positions: input " + shape_str(x.shape()) +
                                         " is not [B, S, E]"));
  const int64_t S = x.size(1);
  amp::AutocastGuard fp32_mean(false);
  const Tensor pooled = matmul(Tensor::full({1, 1, S}, 1.0 / double(S), x.dtype()), x);  // [B, 1, E]
  return reshape(pooled, {x.size(0), x.size(2)});
}

Tensor mean_over_positions(const Tensor& x, const Tensor& weights) {
  if (x.dim() != 3 || weights.dim() != 2 || weights.size(0) != x.size(0) || weights.size(1) != x.size(1))
    throw Error(Status::invalid_argument("masked mean over positions: input " + shape_str(x.shape()) + ", weights " +
                                         shape_str(weights.shape()) + ": expected [B, S, E] and [B, S]"));
  amp::AutocastGuard fp32_mean(false);
  const Tensor w = reshape(weights.to(x.dtype()), {x.size(0), 1, x.size(1)});
  return reshape(matmul(w, x), {x.size(0), x.size(2)});  // [B, 1, S] x [B, S, E]
}

namespace {

// Each byte id looked up in a 256-entry table: `padding` for byte 0, `text` for the others
// ([B, S] i64 -> [B, S] f32), composed from the embedding op.
Tensor per_byte(const Tensor& ids, double padding, double text) {
  if (ids.dim() != 2 || ids.dtype() != DType::i64)
    throw Error(Status::invalid_argument("padding mask: ids " + ids.str() + " are not [B, S] i64"));
  std::vector<double> table(256, text);
  table[0] = padding;
  NoGradGuard constant;
  return reshape(embedding(ids, Tensor::from_vector_f64(table, {256, 1}, DType::f32)), ids.shape());
}

}  // namespace

Tensor key_padding_mask(const Tensor& ids) { return per_byte(ids, kPaddingScore, 0.0); }

Tensor padding_weights(const Tensor& ids) {
  NoGradGuard constant;
  const Tensor keep = per_byte(ids, 0.0, 1.0);
  // keep / count; the tiny term leaves every count >= 1 exact in f32 and gives a text of
  // padding only 0 weights instead of 0 / 0.
  return div(keep, add(sum(keep, {1}, true), 1e-30));
}

TokenEmbedding::TokenEmbedding(int64_t vocab, int64_t positions_, int64_t dim) {
  tokens = register_module("tokens", std::make_shared<Embedding>(vocab, dim));
  positions = register_module("positions", std::make_shared<Embedding>(positions_, dim));
  NoGradGuard ng;
  for (Tensor* w : {&tokens->weight, &positions->weight}) {
    MemoryCategoryGuard mg(MemoryCategory::parameters);
    w->copy_(Tensor::normal(w->shape(), 0.0, 0.02));
  }
}

Tensor TokenEmbedding::forward(const Tensor& ids) {
  const int64_t max_positions = positions->weight.size(0);
  if (ids.dim() != 2 || ids.dtype() != DType::i64 || ids.size(1) > max_positions)
    throw Error(Status::invalid_argument("TokenEmbedding: input " + ids.str() + " is not token ids [B, S] (i64) with S <= " +
                                         std::to_string(max_positions)));
  const int64_t S = ids.size(1);
  std::vector<int64_t> at(static_cast<size_t>(S));
  for (int64_t t = 0; t < S; ++t) at[size_t(t)] = t;
  return add((*tokens)(ids), (*positions)(Tensor::from_vector_i64(at, {S})));  // [B, S, d] + [S, d]
}

Tensor TokenEmbedding::forward_at(int64_t token, int64_t position) {
  return add((*tokens)(Tensor::from_vector_i64({token}, {1})), (*positions)(Tensor::from_vector_i64({position}, {1})));
}

}  // namespace mixprec::nn
