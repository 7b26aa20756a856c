// language_model_layers.cpp: a model file's language model (language_model_layers.h).
#include "nn/language_model_layers.h"

#include "mixprec/autograd/autograd.h"
#include "mixprec/core/memory.h"

namespace mixprec::nn {

LmHead::LmHead(std::shared_ptr<Embedding> tied) : tied_(std::move(tied)) {}

LmHead::LmHead(int64_t vocab, int64_t dim) {
  MemoryCategoryGuard mg(MemoryCategory::parameters);
  weight = register_parameter("weight", Tensor::normal({vocab, dim}, 0.0, 0.02));
}

Tensor LmHead::forward(const Tensor& x) {
  // The tied table is read at every call: a precision preset may have replaced it.
  const Tensor& w = tied_ ? tied_->weight : weight;
  const int64_t E = w.size(1);
  if ((x.dim() != 2 && x.dim() != 3) || x.size(-1) != E)
    throw Error(Status::invalid_argument("lm_head: input " + shape_str(x.shape()) + " is not [B, T, " +
                                         std::to_string(E) + "] or [N, " + std::to_string(E) + "]"));
  if (x.dim() == 2) return linear(x, w);
  const int64_t B = x.size(0), T = x.size(1);
  return reshape(linear(reshape(x, {B * T, E}), w), {B, T, w.size(0)});
}

Tensor FileLanguageModel::forward_step(int64_t token, KvCache& cache) {
  const auto& layers = children();
  auto* embedding = layers.empty() ? nullptr : dynamic_cast<TokenEmbedding*>(layers.front().second.get());
  if (embedding == nullptr)
    throw Error(Status::internal("FileLanguageModel: its first layer is not a token embedding"));
  check_next_token(token, embedding->tokens->weight.size(0), cache, context_);
  NoGradGuard no_grad;
  Tensor x = embedding->forward_at(token, cache.length);  // [1, E]
  size_t block = 0;
  for (size_t i = 1; i < layers.size(); ++i) {
    Module& layer = *layers[i].second;
    if (auto* decoder = dynamic_cast<GptBlock*>(&layer)) {
      if (cache.keys.size() <= block) cache.keys.resize(block + 1), cache.values.resize(block + 1);
      x = decoder->forward_step(x, cache.keys[block], cache.values[block]);
      ++block;
    } else {
      x = layer(x);  // per position (the planner allows no other kind): [1, E] in, [1, E or vocab] out
    }
  }
  ++cache.length;
  return reshape(x, {x.numel()});
}

}  // namespace mixprec::nn
