// language_model_layers.h: what a model file that ends in lm_head is built into
// (model_file.cpp): the output head over the 256 bytes, tied to the embedding's token table or
// its own, and the layer stack that also reads one token at a time with a key/value cache.
#pragma once
#include <cstdint>
#include <memory>

#include "mixprec/nn/models.h"
#include "mixprec/nn/nn_attention.h"

namespace mixprec::nn {

// Logits over the vocabulary at every position: x W^T without a bias, W = the embedding's
// token table [vocab, E] (weight tying, as GPT-2) or a weight of its own.
// [B, T, E] -> [B, T, vocab]; [N, E] -> [N, vocab].
class LmHead : public Module {
 public:
  explicit LmHead(std::shared_ptr<Embedding> tied);  // shares tied->weight (not registered twice)
  LmHead(int64_t vocab, int64_t dim);                 // untied: weight [vocab, E], N(0, 0.02)
  Tensor forward(const Tensor& x) override;
  const char* type_name() const override { return "LmHead"; }
  const Embedding* tied() const { return tied_.get(); }  // null: untied, `weight` is its own
  Tensor weight;  // untied only

 private:
  std::shared_ptr<Embedding> tied_;
};

// A model file's language model: its layers in order (a TokenEmbedding first, then decoder
// blocks and per-position layers, an LmHead last), run as a Sequential by forward() and one
// token at a time by forward_step().
class FileLanguageModel : public Sequential, public StepwiseLanguageModel {
 public:
  explicit FileLanguageModel(int64_t context) : context_(context) {}
  Tensor forward_step(int64_t token, KvCache& cache) override;
  int64_t context_length() const override { return context_; }
  const char* type_name() const override { return "FileLanguageModel"; }

 private:
  int64_t context_;
};

}  // namespace mixprec::nn
