// attention.cpp: nn::MultiheadAttention (self-attention, batch_first, no mask), composed of
// ops only: narrow (the Q, K and V blocks of in_proj_weight), linear, permute (split and
// merge heads), matmul (autocast: lower), softmax (fp32) or, on 16-bit scores,
// attention_softmax, and dropout; from fused_from(causal) positions on (by default, with
// AVX-512, 128 causal and 256 not; 1024 without) and without dropout on the weights, the fused
// scaled_dot_product_attention's kernel on qkv's columns in place (attention_from_packed_qkv)
// instead of the three and the heads' split and merge. The kernels live in src/backend, the
// ops in src/ops.
// Letters: B batch, S sequence, E embed dim, H heads, D = E / H.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/cpu_features.h"
#include "mixprec/nn/nn_attention.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

namespace {

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

}  // namespace

namespace {

// The threshold's override: MIXPREC_ATTENTION_FUSED_FROM=N or set_fused_from's (tests and
// benchmarks compare both routes; 1: always fused, a huge value: never), kDefaults for none,
// kUnread before the environment was read.
constexpr int64_t kUnread = 0, kDefaults = -1;
std::atomic<int64_t> fused_from_override{kUnread};

int64_t override_now() {
  int64_t v = fused_from_override.load();
  if (v == kUnread) {
    const char* e = std::getenv("MIXPREC_ATTENTION_FUSED_FROM");
    const long long n = e ? std::atoll(e) : 0;
    int64_t expected = kUnread;
    fused_from_override.compare_exchange_strong(expected, n > 0 ? int64_t(n) : kDefaults);
    v = fused_from_override.load();
  }
  return v;
}

// The default, per CPU path (bench/bench_attention.cpp, CPU time of one forward + backward,
// docs/benchmarks.md "Fused attention"). With AVX-512 the fused kernel's products are
// register-blocked (vdpbf16ps on bf16 inputs where the CPU has AVX512-BF16, as oneDNN's bf16
// GEMMs; f32 FMAs otherwise). Causal, it computes only the visible half of the scores and
// their products (the unfused route all of them): faster from 32 positions on (gpt-tiny's
// 64 x 128 x 32: ~1.4x forward, ~1.15-1.25x forward + backward in bf16, ~1.3x in f32).
// Without a mask it does the same products as oneDNN's GEMMs: level at 128 positions with
// D = 32, slower with D = 64 (~0.85x, bf16), faster from 256. With AVX2 and FMA but no
// AVX-512 (flash_rows_avx2.h; measured on a Zen 4 with AVX-512 hidden, 1 thread, CPU time,
// forward + backward, under load): causal faster from 128 (gpt-tiny's shape 6.8 vs 11.0 ms
// bf16, 8.1 vs 10.6 f32; 512 x 64: 38.7 vs 59.8), unmasked level at 128-256 and slower at 512
// with D = 64 (75.0 vs 66.6 ms), so taken there for its memory (linear in S) from 1024, where
// it is also faster. Without AVX2 its plain loops are ~5x slower than oneDNN's GEMMs at every
// length: from 1024 positions, for its memory alone.
int64_t default_fused_from(bool causal) {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) return causal ? 128 : 256;
  if (f.avx2 && f.fma) return causal ? 128 : 1024;
  return 1024;
}

}  // namespace

int64_t MultiheadAttention::fused_from(bool causal) {
  const int64_t v = override_now();
  return v > 0 ? v : default_fused_from(causal);
}

int64_t MultiheadAttention::set_fused_from(int64_t positions) {
  const int64_t before = override_now();
  fused_from_override.store(positions > 0 ? positions : kDefaults);
  return before > 0 ? before : 0;
}

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, double dropout_,
                                       bool bias, bool causal_)
    : embed_dim(embed_dim_), num_heads(num_heads_), head_dim(0), dropout(dropout_), causal(causal_) {
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads != 0)
    bad("MultiheadAttention: embed_dim " + std::to_string(embed_dim) + " and num_heads " +
        std::to_string(num_heads) + ": both must be >= 1 and embed_dim divisible by num_heads");
  if (!(dropout >= 0.0 && dropout < 1.0))
    bad("MultiheadAttention: dropout must be in [0, 1), got " + std::to_string(dropout));
  head_dim = embed_dim / num_heads;
  {
    MemoryCategoryGuard mg(MemoryCategory::parameters);
    // xavier_uniform_ on [3E, E]: fan_in E, fan_out 3E, bound sqrt(6 / (fan_in + fan_out)).
    const double bound = std::sqrt(6.0 / double(4 * embed_dim));
    in_proj_weight = register_parameter(
        "in_proj_weight", Tensor::uniform({3 * embed_dim, embed_dim}, -bound, bound));
    if (bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({3 * embed_dim}));
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias));
  if (bias) out_proj->bias.fill_(0.0);  // PyTorch's _reset_parameters: constant_(out_proj.bias, 0)
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor MultiheadAttention::forward(const Tensor& x, const Tensor& key_padding, const Tensor& attn_mask) {
  if (x.dim() != 3 || x.size(2) != embed_dim)
    bad("MultiheadAttention: input " + shape_str(x.shape()) + " does not fit (expected [B, S, " +
        std::to_string(embed_dim) + "])");
  const int64_t B = x.size(0), S = x.size(1), E = embed_dim, H = num_heads, D = head_dim;
  const Tensor tokens = reshape(x, {B * S, E});
  // One [B*S, E] x [E, 3E] projection for Q, K and V together (a GEMM three times as wide
  // runs nearer the machine's peak than three [E, E] ones; backward, one data-gradient and
  // one weight-gradient GEMM), then the heads split out of its column blocks. PyTorch
  // scales Q (not the scores) by 1 / sqrt(D): fewer elements, folded into the copy.
  const Tensor qkv = linear(tokens, in_proj_weight, in_proj_bias);
  const double q_scale = 1.0 / std::sqrt(double(D));
  const bool dropping = dropout > 0.0 && is_training();
  if (key_padding.defined() && (key_padding.dim() != 2 || key_padding.size(0) != B || key_padding.size(1) != S))
    bad("MultiheadAttention: key padding mask " + shape_str(key_padding.shape()) + " is not [" + std::to_string(B) +
        ", " + std::to_string(S) + "]");
  const bool per_head_mask = attn_mask.defined() && attn_mask.dim() == 3;
  if (attn_mask.defined() &&
      !((attn_mask.dim() == 2 && attn_mask.size(0) == S && attn_mask.size(1) == S) ||
        (per_head_mask && attn_mask.size(0) == B * H && attn_mask.size(1) == S && attn_mask.size(2) == S)))
    bad("MultiheadAttention: attention mask " + shape_str(attn_mask.shape()) + " is neither [" + std::to_string(S) +
        ", " + std::to_string(S) + "] nor [" + std::to_string(B * H) + ", " + std::to_string(S) + ", " +
        std::to_string(S) + "] (batch x heads, one per head as PyTorch's)");
  if (S >= fused_from(causal) && !dropping && !attn_mask.defined()) {
    // The fused kernel (scaled_dot_product_attention): no [S, S] scores or probabilities are
    // stored, the causal mask's blocks are skipped, and the key padding is a per-key bias.
    // attention_from_packed_qkv: the kernel reads K and V in place from qkv and writes the
    // context as out_proj's [B*S, E] input, the same bits as split_attention_heads,
    // scaled_dot_product_attention and permute without their copies (Q stays a scaled copy).
    const Tensor merged = attention_from_packed_qkv(qkv, B, H, causal, q_scale, key_padding, 64);
    return reshape((*out_proj)(merged), {B, S, E});
  }
  // The unfused route: the reference the fused one is tested against, and the only one
  // with dropout on the attention weights.
  const AttentionOperands heads = split_attention_heads(qkv, B, H, q_scale, /*k_transposed=*/true);
  const Tensor &q = heads.q, &k_t = heads.k, &v = heads.v;
  Tensor scores = matmul(q, k_t);  // [B*H, S, S]
  if (key_padding.defined())  // + [B, 1, 1, S]: a padded key's column at the dtype's lowest value
    scores = reshape(add(reshape(scores, {B, H, S, S}), reshape(key_padding.to(scores.dtype()), {B, 1, 1, S})),
                     {B * H, S, S});
  if (attn_mask.defined())  // + [1, S, S] on every batch row and head, or [B*H, S, S] each its own
    scores = add(scores, per_head_mask ? attn_mask.to(scores.dtype()) : reshape(attn_mask.to(scores.dtype()), {1, S, S}));
  // 16-bit scores, and every causal mask, go through attention_softmax (its own kernel);
  // f32 scores without a mask through softmax, as PyTorch.
  Tensor weights = causal || scores.dtype() == DType::bf16 || scores.dtype() == DType::f16
                       ? mixprec::attention_softmax(scores, causal)
                       : softmax(scores, -1);
  if (dropout > 0.0) weights = mixprec::dropout(weights, dropout, is_training());
  const Tensor context = reshape(matmul(weights, v), {B, H, S, D});
  const Tensor merged = reshape(permute(context, {0, 2, 1, 3}), {B * S, E});
  return reshape((*out_proj)(merged), {B, S, E});
}

Tensor MultiheadAttention::forward_step(const Tensor& x, Tensor& k_cache, Tensor& v_cache) {
  if (x.dim() != 2 || x.size(0) != 1 || x.size(1) != embed_dim)
    bad("MultiheadAttention::forward_step: input " + shape_str(x.shape()) + " is not [1, " +
        std::to_string(embed_dim) + "]");
  const int64_t E = embed_dim, H = num_heads, D = head_dim;
  auto project = [&](int64_t part, double scale) {  // [1, E] -> [H, 1, D]
    const Tensor w = narrow(in_proj_weight, part * E, E);
    const Tensor b = in_proj_bias.defined() ? narrow(in_proj_bias, part * E, E) : Tensor();
    return reshape(permute(reshape(linear(x, w, b), {1, 1, H, D}), {0, 2, 1, 3}, scale), {H, 1, D});
  };
  const Tensor q = project(0, 1.0 / std::sqrt(double(D)));
  const Tensor k = project(1, 1.0), v = project(2, 1.0);
  k_cache = k_cache.defined() ? cat({k_cache, k.to(k_cache.dtype())}, 1) : k;
  v_cache = v_cache.defined() ? cat({v_cache, v.to(v_cache.dtype())}, 1) : v;
  const int64_t t = k_cache.size(1);
  const Tensor k_t = reshape(permute(reshape(k_cache, {1, H, t, D}), {0, 1, 3, 2}), {H, D, t});
  const Tensor scores = matmul(q, k_t);  // [H, 1, t]: every cached position is visible
  const Tensor weights = scores.dtype() == DType::bf16 || scores.dtype() == DType::f16
                             ? mixprec::attention_softmax(scores)
                             : softmax(scores, -1);
  const Tensor context = matmul(weights, v_cache);  // [H, 1, D]
  const Tensor merged = reshape(permute(reshape(context, {1, H, 1, D}), {0, 2, 1, 3}), {1, E});
  return (*out_proj)(merged);
}

Tensor linear_over_tokens(Linear& layer, const Tensor& input) {
  if (input.dim() != 3)
    bad("linear_over_tokens: input " + shape_str(input.shape()) + " is not [B, S, features]");
  const int64_t B = input.size(0), S = input.size(1);
  const Tensor out = layer(reshape(input, {B * S, input.size(2)}));
  return reshape(out, {B, S, out.size(1)});
}

}  // namespace mixprec::nn
