// ops.h: the functional API (PyTorch's torch.* / F.*). Every op records autograd when an
// input requires grad and grad mode is on, and picks its dtypes from the autocast policy.
// Shapes are logical (NCHW); errors throw mixprec::Error naming the op and the shapes.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec {

// A per-axis argument of the 2-D convolutions and pooling: {H, W}, PyTorch's pair.
using Axes2 = std::array<int64_t, 2>;

// ---- layout and dtype ----
Tensor cast(const Tensor& src, DType dtype);                   // differentiable
Tensor to_memory_format(const Tensor& src, MemoryFormat format);  // differentiable copy
Tensor reshape(const Tensor& src, const Shape& shape);
Tensor flatten(const Tensor& src, int64_t start_dim = 1, int64_t end_dim = -1);
Tensor transpose(const Tensor& src, int64_t dim0, int64_t dim1);  // returns a contiguous copy
// scale * src.permute(dims) as a contiguous copy of a 4-D floating tensor (attention splits
// and merges heads with it, and folds Q's 1/sqrt(D) into the copy). Autocast: transpose's row.
Tensor permute(const Tensor& src, const std::array<int, 4>& dims, double scale = 1.0);
// Rows [start, start + length) of dim 0 as a contiguous copy. Autocast: reshape's row.
Tensor narrow(const Tensor& src, int64_t start, int64_t length);
// Self-attention's operands out of one fused input projection: qkv [B*S, 3E] holds Q | K | V
// as column blocks (PyTorch's in_proj layout), E = heads x D. Returns q [B*H, S, D] times
// q_scale, k as [B*H, D, S] (k_transposed, for q k^T by matmul) or [B*H, S, D], and v
// [B*H, S, D]: the permuting copies read straight from qkv's columns, so the projection is
// one [B*S, E] x [E, 3E] GEMM instead of three narrow ones. Backward gives qkv one
// gradient, its column blocks the three parts' gradients (zeros for a part that got none),
// as PyTorch's multi-output split does: nothing zero-padded is built or added per part.
// Autocast: transpose's row (keep).
struct AttentionOperands {
  Tensor q, k, v;
};
AttentionOperands split_attention_heads(const Tensor& qkv, int64_t batch, int64_t heads, double q_scale = 1.0,
                                        bool k_transposed = true);

// ---- elementwise ----
// The elementwise ops of one tensor (neg, exp, log, ...) and of two (add, sub, mul, div;
// promote: mixed dtypes compute in the widest; b broadcasts to a): one declaration
// `Tensor name(const Tensor& a);` per MIXPREC_UNARY_OP line of mixprec/ops/ops.def and
// `Tensor name(const Tensor& a, const Tensor& b);` per MIXPREC_BINARY_OP line.
#define MIXPREC_OP(name, policy, torch113)
#define MIXPREC_UNARY_OP(name, policy, low, high, torch113) Tensor name(const Tensor& a);
#define MIXPREC_BINARY_OP(name, policy, low, high, torch113) Tensor name(const Tensor& a, const Tensor& b);
#include "mixprec/ops/ops.def"
#undef MIXPREC_BINARY_OP
#undef MIXPREC_UNARY_OP
#undef MIXPREC_OP
Tensor mul(const Tensor& a, double b);
Tensor add(const Tensor& a, double b);
Tensor relu(const Tensor& a);

// ---- matrix ops ----
// src [N, K], weights [O, K] (PyTorch layout), bias [O] or undefined -> [N, O]
Tensor linear(const Tensor& src, const Tensor& weights, const Tensor& bias = Tensor());
// a [.., M, K] x b [.., K, N] -> [.., M, N]
Tensor matmul(const Tensor& a, const Tensor& b);
// Convolutions take PyTorch 1.13's arguments, order, shapes and rules: weight [O, C / groups,
// ...] with O divisible by groups (a transposed convolution's [C_in, C_out / groups, ...] with
// C_in divisible by groups), stride >= 1, padding >= 0, dilation >= 1; each spatial output
// size is (in + 2 padding - dilation (k - 1) - 1) / stride + 1, a transposed one's
// (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1 with output_padding <
// max(stride, dilation). Bad arguments raise an Error naming the op.
//
// The 2-D ops take each spatial argument as one int (the same on H and W) or per axis as an
// Axes2 {H, W}, PyTorch's int-or-pair; the int form is the pair form with both axes equal, and
// each axis follows the rules on its own (a bad value's message names its axis).
//
// src [N, C, H, W], weights [O, C / groups, KH, KW] (KH and KW may differ), bias [O] -> [N, O, OH, OW]
Tensor conv2d(const Tensor& src, const Tensor& weights, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
Tensor conv2d(const Tensor& src, const Tensor& weights, const Tensor& bias, Axes2 stride, Axes2 padding,
              Axes2 dilation = {1, 1}, int64_t groups = 1);
// F.conv1d: input [N, C, L] (or unbatched [C, L]), weight [O, C / groups, K], bias [O] ->
// [N, O, OL]. A conv2d of unit height (exact).
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// F.conv3d: input [N, C, D, H, W] (or [C, D, H, W]), weight [O, C / groups, KD, KH, KW], bias
// [O] -> [N, O, OD, OH, OW], the same stride, padding and dilation on the three axes. One
// conv2d over (channel, depth tap) pairs (exact; ops/conv3d.cpp).
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// F.conv_transpose2d: input [N, C_in, H, W] (or [C_in, H, W]), weight [C_in, C_out / groups,
// KH, KW] (PyTorch's layout), bias [C_out] -> [N, C_out, OH, OW]. The adjoint of conv2d:
// decoders' and segmentation heads' upsampling.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, int64_t dilation = 1);
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Axes2 stride, Axes2 padding,
                        Axes2 output_padding = {0, 0}, int64_t groups = 1, Axes2 dilation = {1, 1});
// F.conv_transpose1d: input [N, C_in, L] (or [C_in, L]), weight [C_in, C_out / groups, K]; as
// conv_transpose2d of unit height.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, int64_t dilation = 1);
// F.conv_transpose3d: input [N, C_in, D, H, W] (or [C_in, D, H, W]), weight [C_in,
// C_out / groups, KD, KH, KW], bias [C_out] -> [N, C_out, OD, OH, OW], the same stride,
// padding, output_padding and dilation on the three axes. One conv_transpose2d over (channel,
// depth tap) pairs (exact; ops/conv_transpose3d.cpp): volumetric decoders' upsampling.
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, int64_t dilation = 1);

// ---- PyTorch's BLAS-style ops (lower policy, each its own row; src/ops/blas.cpp) ----
// PyTorch's names, argument order and defaults (beta and alpha are keyword-only there).
// Every operand has one floating dtype (outside autocast a mix raises, as PyTorch's does).
// The add* ops return beta * input + alpha * product, input broadcast to the product's
// shape; beta == 0 ignores input's values (NaN included), as PyTorch.
Tensor mm(const Tensor& input, const Tensor& mat2);  // [M, K] x [K, N] -> [M, N]
Tensor mv(const Tensor& input, const Tensor& vec);   // [M, K] x [K] -> [M]
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, double beta = 1.0,
             double alpha = 1.0);  // product mat1 [M, K] x mat2 [K, N]
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, double beta = 1.0,
             double alpha = 1.0);  // product mat [M, K] x vec [K]
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, double beta = 1.0,
            double alpha = 1.0);  // outer product vec1 [M] x vec2 [N]
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta = 1.0,
               double alpha = 1.0);  // product batch1 [B, M, K] x batch2 [B, K, N] -> [B, M, N]
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta = 1.0,
              double alpha = 1.0);  // sum over b of batch1[b] x batch2[b] -> [M, N]
// The product of 2-D matrices in the cheapest order (PyTorch's choice: multi_dot's).
Tensor chain_matmul(const std::vector<Tensor>& matrices);

// ---- pooling ----
// src [N, C, H, W]; PyTorch's rules per axis: kernel >= 1, stride >= 1 (the int form's stride
// -1: the kernel's), 0 <= padding <= kernel / 2, and at least one output row and column.
// Average pooling counts the padding in its divisor (PyTorch's count_include_pad).
Tensor max_pool2d(const Tensor& src, int64_t kernel, int64_t stride = -1, int64_t padding = 0);
Tensor max_pool2d(const Tensor& src, Axes2 kernel, Axes2 stride, Axes2 padding = {0, 0});
Tensor avg_pool2d(const Tensor& src, int64_t kernel, int64_t stride = -1, int64_t padding = 0);
Tensor avg_pool2d(const Tensor& src, Axes2 kernel, Axes2 stride, Axes2 padding = {0, 0});

// ---- reductions ----
Tensor sum(const Tensor& src);                                          // all elements
Tensor sum(const Tensor& src, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& src);
Tensor mean(const Tensor& src, const std::vector<int64_t>& dims, bool keepdim = false);

// ---- softmax and losses ----
Tensor softmax(const Tensor& src, int64_t dim);
Tensor log_softmax(const Tensor& src, int64_t dim);
// softmax over the last dim in the input's own dtype, with f32 arithmetic inside and one
// rounding out (backend/cpu/softmax_rows.h; f64 runs the reference softmax). Attention
// calls it on its 16-bit scores in place of softmax, whose fp32 row would move the
// [B*H, S, S] scores through two casts each way. Its own row of the policy table: keep.
// causal: scores are [..., S, S] and query i attends to keys 0..i only (the hidden
// probabilities are exactly 0, as after a -inf mask; GPT-style decoders).
Tensor attention_softmax(const Tensor& scores, bool causal = false);
// softmax(scale * q k^T [+ key_padding] [+ causal mask]) v for q, k, v [N, S, D], [N, S, D],
// [N, S, Dv] (N = batch x heads), fused (backend/cpu/flash_attention.h: FlashAttention's
// blocks of `block` queries against blocks of `block` keys, online softmax): no [S, S] score
// matrix is ever stored, only a block x block tile per thread, and backward recomputes the
// tiles from q, k, v and the log-sum-exp of each row, so activation memory grows with S, not
// S^2. Softmax statistics, products and sums in f32 whatever the input dtype (f64 for f64
// inputs), one rounding of each output; autocast: lower, as PyTorch 2's op of this name.
// Results are the same bits for any thread count. With causal, key blocks past a query
// block are never computed. key_padding: undefined, or an additive per-key mask [B, S] (f32;
// nn::key_padding_mask(): 0, or kPaddingScore at padding) with N = B x heads, head n reading
// row n / heads; non-causal calls skip key blocks that are padding only. No dropout: callers
// that need dropout on the attention weights use matmul, attention_softmax and matmul.
// scale: PyTorch's default 1/sqrt(D) when not given.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                                    std::optional<double> scale = std::nullopt, int64_t block = 64,
                                    const Tensor& key_padding = Tensor());
// Self-attention on a fused projection without its layout copies: qkv [B*S, 3E] as
// split_attention_heads takes it (E = heads x D), and the context merged back to [B*S, E]
// (out_proj's input), equal bit for bit to split_attention_heads(qkv, B, heads, q_scale,
// false), scaled_dot_product_attention(q, k, v, causal, 1.0, block, key_padding) and
// permute(context, {0, 2, 1, 3}) reshaped, forward and backward; the fused kernel reads K
// and V in place from qkv's columns and writes the context, and qkv's gradient, in place.
// Q stays a scaled copy (rounded before the products, as split_attention_heads'). Autocast:
// scaled_dot_product_attention's row (lower) on qkv, which a 16-bit linear already gives.
// key_padding: undefined or [B, S], as scaled_dot_product_attention's.
Tensor attention_from_packed_qkv(const Tensor& qkv, int64_t batch, int64_t heads, bool causal, double q_scale,
                                 const Tensor& key_padding = Tensor(), int64_t block = 64);
enum class Reduction : uint8_t { none, mean, sum };
// log_probs [N, C], target [N] i64 class indices -> scalar (mean) or [N]
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction r = Reduction::mean);
// logits [N, C], target [N] i64 -> scalar; computed in f32 (log_softmax + nll)
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction r = Reduction::mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r = Reduction::mean);

// ---- normalisation (fp32 policy: statistics in f32 or wider) ----
// Normalises over the last k dims (normalized_shape == src.shape()[-k:]) with the biased
// variance. weight/bias have normalized_shape, or are undefined (no affine). The output
// has src's dtype after autocast (f32 under autocast, f64 for f64); weight/bias may be in
// another floating dtype (f32 parameters with a bf16 input outside autocast).
Tensor layer_norm(const Tensor& src, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// src [N, C, ...] (typically [N, C, H, W] or [N, C]); running_mean, running_var, weight,
// bias [C], each optional. training (or no running stats): normalises with the batch's
// mean and biased variance per channel and, when running stats are given, updates them in
// place (no autograd): running = (1 - momentum) * running + momentum * batch_stat, with the
// unbiased variance for running_var (PyTorch's rule). Eval: normalises with the running
// stats. The tensors are handles, so "in place" reaches the caller's buffers.
Tensor batch_norm(const Tensor& src, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

// ---- activations (keep policy: run in the input dtype) ----
// F.prelu: input for input > 0, weight * input otherwise; weight holds one value, or one per
// channel (input's dim 1; a 0-D or 1-D input has one channel). A weight of another floating
// dtype is cast to the input's (PyTorch's rule). Autocast: its own row, lower.
Tensor prelu(const Tensor& input, const Tensor& weight);
// Exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), PyTorch's default approximate='none'.
Tensor gelu(const Tensor& src);
// Zeroes each element with probability p (draws from the global generator, manual_seed) and
// scales the kept ones by 1 / (1 - p). Identity (returns src) when !training or p == 0.
// p must be in [0, 1).
Tensor dropout(const Tensor& src, double p = 0.5, bool training = true);

// ---- math (fp32 policy) ----
Tensor pow(const Tensor& src, double exponent);

// ---- joining (promote policy: mixed dtypes run in the widest) ----
// Sizes must match except along dim; the output is contiguous.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equal-shaped tensors along a new dim (in [-(n+1), n] for n-dim inputs).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// ---- lookup (keep policy: runs in the weight's dtype) ----
// F.embedding: out[i..., :] = weight[indices[i...], :] for integer indices in [0, rows) and a
// [rows, dim] weight; shape indices.shape + [dim]. The weight's gradient accumulates in f32
// (f64 for f64) and is rounded once to its dtype. An index out of range throws, naming it.
Tensor embedding(const Tensor& indices, const Tensor& weight);
// Tensor.index_add(0, indices, source): input [rows, ...] with source's rows [n, ...] added
// at rows indices[i] (1-D integers in [0, rows)), repeated rows adding up: embedding's
// adjoint, on its backward's kernel (the added rows summed in f32, f64 for f64, in the order
// of i, rounded once, then added to input). Gradients: input's passes through, source row i
// gets the output gradient's row indices[i]. input and source in one floating dtype.
Tensor index_add(const Tensor& input, const Tensor& indices, const Tensor& source);

// ---- no autograd ----
// Index of the max along the last dim: logits [N, C] -> [N] i64.
Tensor argmax(const Tensor& src);

}  // namespace mixprec
