// transformer.cpp: nn::TransformerEncoderLayer, PyTorch's post-norm encoder layer
// (norm_first=False) built from MultiheadAttention, two Linear layers, two LayerNorms and
// dropouts, registered in PyTorch's order so named_parameters() lists the same names.
// Letters: B batch, S sequence, E = d_model, F = dim_feedforward.
#include <string>

#include "mixprec/nn/nn_attention.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "nn/residual_norm.h"

namespace mixprec::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double dropout_p,
                                                 Activation activation_, double layer_norm_eps)
    : activation(activation_) {
  if (dim_feedforward < 1)
    throw Error(Status::invalid_argument("TransformerEncoderLayer: dim_feedforward must be >= 1, got " +
                                         std::to_string(dim_feedforward)));
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, dropout_p));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  linear2 = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d_model}, layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d_model}, layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(dropout_p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(dropout_p));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& key_padding, const Tensor& attn_mask) {
  // Residual sums follow the promote policy: under autocast the f32 stream plus a bf16
  // branch is summed in f32, and the LayerNorms (fp32 policy) keep the stream in f32. Each
  // add runs with the norm that reads it (add_layer_norm: one pass, the bf16 branch
  // widened as it is read); the norm's output is the stream, so it stays f32.
  const Tensor attended = self_attn->with_precision(x, [&](const Tensor& in) { return self_attn->forward(in, key_padding, attn_mask); });
  Tensor h = residual_norm(x, (*dropout1)(attended), *norm1, /*gemm_next=*/false).normed;  // [B, S, E]
  Tensor ff = linear_over_tokens(*linear1, h);                 // [B, S, F]
  ff = activation == Activation::gelu ? gelu(ff) : relu(ff);
  ff = linear_over_tokens(*linear2, (*dropout)(ff));           // [B, S, E]
  return residual_norm(h, (*dropout2)(ff), *norm2, /*gemm_next=*/false).normed;
}

}  // namespace mixprec::nn
