// nn_attention.h: self-attention and the transformer encoder layer (torch.nn's
// MultiheadAttention with batch_first=True, and TransformerEncoderLayer with norm_first=False),
// named so that a PyTorch state_dict maps onto named_parameters() one to one:
//   self_attn.in_proj_weight [3E, E], self_attn.in_proj_bias [3E],
//   self_attn.out_proj.weight [E, E], self_attn.out_proj.bias [E],
//   linear1.{weight,bias}, linear2.{weight,bias}, norm1.{weight,bias}, norm2.{weight,bias}.
// Letters: B batch, S sequence, E = d_model, H heads, D = E / H per head.
#pragma once
#include <cstdint>
#include <memory>

#include "mixprec/nn/nn.h"
#include "mixprec/nn/nn_sequence.h"  // the key padding mask MultiheadAttention takes

namespace mixprec::nn {

// Self-attention: softmax(Q K^T / sqrt(D)) V per head (with causal, position i attends to
// positions 0..i only, as PyTorch's is_causal=True / a -inf upper-triangle mask), where
// [Q K V] = x in_proj_weight^T + in_proj_bias (rows 0..E-1 of in_proj give Q, then K, then V),
// followed by out_proj. The attention itself is the fused scaled_dot_product_attention
// (autocast: lower, so it reads the autocast dtype; f32 inside), or, on the unfused route
// (fused_from() below), two matmuls (autocast: lower) around softmax (autocast: fp32) or,
// for 16-bit or causal scores, attention_softmax.
// Initialisation as PyTorch's: in_proj_weight xavier_uniform, in_proj_bias and
// out_proj.bias zeros, out_proj.weight like Linear's.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool causal = false);
  Tensor forward(const Tensor& input) override;  // [B, S, E] -> [B, S, E]
  // With a key padding mask (PyTorch's key_padding_mask as an additive float mask): [B, S],
  // 0 where a position may be attended to and kPaddingScore where it is padding
  // (key_padding_mask(): no query sees a padded key). Undefined: no mask.
  // attn_mask: undefined, an additive [S, S] mask on every batch row's and head's scores, or
  // [B x heads, S, S], one per batch row and head (row b * heads + h: PyTorch's 3-d float
  // attn_mask); it runs the unfused route (the fused kernel has no such mask).
  Tensor forward(const Tensor& input, const Tensor& key_padding, const Tensor& attn_mask = Tensor());
  // One new position of one sequence (text generation with a key/value cache): x [1, E] is
  // the position's input; its key and value are appended to k_cache / v_cache ([H, t, D],
  // undefined when empty) and it attends to every cached position, itself included: the
  // causal attention of forward() at that position, without recomputing the earlier ones.
  Tensor forward_step(const Tensor& x, Tensor& k_cache, Tensor& v_cache);
  const char* type_name() const override { return "MultiheadAttention"; }
  Tensor in_proj_weight;  // [3E, E]
  Tensor in_proj_bias;    // [3E] or undefined
  std::shared_ptr<Linear> out_proj;
  int64_t embed_dim, num_heads, head_dim;
  double dropout;  // on the attention weights, training mode only
  bool causal;     // decoder self-attention: no position sees a later one
  // Sequences at least this long go through the fused scaled_dot_product_attention (memory
  // grows with S, not S^2; causal blocks skipped; key padding as a per-key bias) unless
  // dropout on the weights is active (the fused kernel has none); shorter ones take the
  // matmul-softmax-matmul route, the reference the fused one is tested against. Default on
  // CPUs with AVX-512: 128 for causal attention (the fused route is faster there from 32
  // positions on, it skips the masked half), 256 otherwise (at 128 positions without a mask
  // oneDNN's GEMMs are as fast or faster); 1024 without AVX-512, where the fused kernel's
  // products are plain loops (kept for its memory). The environment's
  // MIXPREC_ATTENTION_FUSED_FROM, when set, is the threshold for both (1: always fused).
  // set_fused_from(positions) sets it for both, for the whole process (tests: a huge value
  // selects the unfused route; 0 or less: back to the defaults), and returns the previous
  // setting (0: the defaults), for a later set_fused_from to restore.
  static int64_t fused_from(bool causal = true);
  static int64_t set_fused_from(int64_t positions);
};

enum class Activation : uint8_t { relu, gelu };

// Post-norm encoder layer (PyTorch's default norm_first=False):
//   x = norm1(x + dropout1(self_attn(x)))
//   x = norm2(x + dropout2(linear2(dropout(activation(linear1(x))))))
// The activation defaults to exact GELU here; PyTorch's default is ReLU (pass
// activation='gelu' there to match).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.0, Activation activation = Activation::gelu,
                          double layer_norm_eps = 1e-5);
  Tensor forward(const Tensor& input) override;  // [B, S, E] -> [B, S, E]
  // Its self-attention given a key padding mask and an attention mask (MultiheadAttention::forward).
  Tensor forward(const Tensor& input, const Tensor& key_padding, const Tensor& attn_mask = Tensor());
  const char* type_name() const override { return "TransformerEncoderLayer"; }
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  Activation activation;
};

// A Linear layer applied to every position of [B, S, in] (linear takes 2-D input, so the
// tokens are flattened to [B*S, in] and back; both reshapes are views).
Tensor linear_over_tokens(Linear& linear, const Tensor& input);

}  // namespace mixprec::nn
