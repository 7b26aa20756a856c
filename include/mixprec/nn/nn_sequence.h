// nn_sequence.h: sequences of byte tokens, the layers around attention (text classifiers,
// language models, model files' embedding and global_avgpool over a sequence): the token
// and position embedding, means over positions (all of them, or those that are not padding),
// and the padding mask and weights made from the ids. Defined in src/nn/sequence_layers.cpp.
#pragma once
#include <cstdint>
#include <memory>

#include "mixprec/nn/nn.h"

namespace mixprec::nn {

// The mean over the positions of [B, S, E]: [B, E]. A product with a constant 1/S row (oneDNN
// 2.6 reduces a middle axis with its slow reference kernel), autocast off so that it keeps
// mean's fp32 policy (an f32 input stays f32; O2's bf16 stays bf16, as mean would).
Tensor mean_over_positions(const Tensor& x);
// The mean over the positions that are not padding: weights [B, S] (f32) are 1 / count at a
// text's real positions and 0 at its padding (padding_weights()); [B, S, E] -> [B, E].
Tensor mean_over_positions(const Tensor& x, const Tensor& weights);

// From byte ids [B, S] (i64, 0 = padding): the additive key mask MultiheadAttention takes
// (f32: 0, or kPaddingScore at padding) and the masked mean's weights (f32).
// kPaddingScore: added to a padded key's scores. Its exp underflows to 0 in every dtype's
// softmax, and unlike -inf (or f32's lowest, which is -inf in bf16) it stays finite in f16,
// bf16 and f32 scores, so a text of padding only attends uniformly instead of giving NaN.
inline constexpr double kPaddingScore = -30000.0;
Tensor key_padding_mask(const Tensor& ids);
Tensor padding_weights(const Tensor& ids);

// Token ids [B, S] (i64, each < vocab, S <= positions) -> [B, S, dim]: a token embedding plus
// a learned embedding of each position (BERT's and GPT-2's input layer). Parameters:
// tokens.weight [vocab, dim], positions.weight [positions, dim], both N(0, 0.02^2) as BERT's.
class TokenEmbedding : public Module {
 public:
  TokenEmbedding(int64_t vocab, int64_t positions, int64_t dim);
  Tensor forward(const Tensor& ids) override;
  // One token at one position: [1, dim] (a language model's step, no batch).
  Tensor forward_at(int64_t token, int64_t position);
  const char* type_name() const override { return "TokenEmbedding"; }
  std::shared_ptr<Embedding> tokens, positions;
};

// [B, S, E] -> [B, E]: mean_over_positions as a layer.
class SequenceMeanPool : public Module {
 public:
  Tensor forward(const Tensor& input) override { return mean_over_positions(input); }
  const char* type_name() const override { return "SequenceMeanPool"; }
};

}  // namespace mixprec::nn
