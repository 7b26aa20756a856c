// op_reference.h: float64 references for the ops whose forward is not a single function of
// the kernel contract (backend/kernels.h). Naive loops over logical (row-major) order,
// everything in double: written from the definitions (PyTorch's documentation), not from
// the production code, so the op registry (ops/registry.h) and the op harness
// (tests/unit/ops/op_harness_test.cpp) can check every dtype against them. Inputs may have
// any floating dtype and layout; outputs are f64, contiguous.
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::ref {

// 0.5 x (1 + erf(x / sqrt 2))
Tensor gelu_reference(const Tensor& src);
Tensor pow_reference(const Tensor& src, double exponent);
// Normalises over the trailing dims of size d = numel(weight or normalized count); weight and
// bias may be undefined (1 and 0).
Tensor layer_norm_reference(const Tensor& src, int64_t normalized_numel, const Tensor& weight,
                            const Tensor& bias, double eps);
// Batch statistics (biased variance) over every dim but 1.
Tensor batch_norm_train_reference(const Tensor& src, const Tensor& weight, const Tensor& bias,
                                  double eps);
// mean over rows of -log_probs[i, target[i]]
Tensor nll_loss_mean_reference(const Tensor& log_probs, const Tensor& target);
// mean over rows of logsumexp(x_i) - x_i[target[i]]
Tensor cross_entropy_mean_reference(const Tensor& logits, const Tensor& target);
Tensor mse_loss_mean_reference(const Tensor& input, const Tensor& target);
// Joins along dim (sizes equal except in dim).
Tensor cat_reference(const std::vector<Tensor>& inputs, int64_t dim);
// out[i_perm...] = src[i...]: out.shape[k] = src.shape[perm[k]].
Tensor permute_reference(const Tensor& src, const std::vector<int64_t>& perm);
// src with dropout's documented mask: one draw per element from `seed`'s mt19937_64 (the
// global generator after manual_seed(seed)), top 53 bits as u in [0, 1): kept if u >= p,
// scaled by 1 / (1 - p).
Tensor dropout_reference(const Tensor& src, double p, uint64_t seed);
// F.conv_transpose2d from its definition: input [N, C_in, H, W], weight [C_in, C_out / groups,
// KH, KW]; input[n, ci, h, w] * weight[ci, j, kh, kw] goes to output channel
// co = (ci / (C_in / groups)) * (C_out / groups) + j at out[n, co, h * stride - padding +
// kh * dilation, w * stride - padding + kw * dilation]; out is [N, C_out, (H - 1) stride -
// 2 padding + dilation (KH - 1) + output_padding + 1, likewise W], plus bias[co] (bias may be
// undefined).
Tensor conv_transpose2d_reference(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride_h,
                                  int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t out_pad_h, int64_t out_pad_w,
                                  int64_t groups = 1, int64_t dil_h = 1, int64_t dil_w = 1);
// F.conv3d from its definition: input [N, C, D, H, W], weight [O, C / groups, KD, KH, KW],
// bias [O] or undefined; the same stride, padding and dilation on the three axes.
Tensor conv3d_reference(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
                        int64_t dilation = 1, int64_t groups = 1);
// F.conv_transpose3d from its definition: input [N, C_in, D, H, W] scatters into out as
// conv_transpose2d_reference does, on three axes with the same stride, padding,
// output_padding and dilation; weight [C_in, C_out / groups, KD, KH, KW].
Tensor conv_transpose3d_reference(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
                                  int64_t padding, int64_t output_padding, int64_t groups = 1, int64_t dilation = 1);
// softmax over the last dim of [..., S, S] where row i of each S x S block sees columns
// 0..i only (the others: probability 0, as after a -inf mask).
Tensor causal_softmax_reference(const Tensor& src);
// out[i..., :] = weight[indices[i...], :] (indices: integers in [0, rows)), shape
// indices.shape + [dim].
Tensor embedding_reference(const Tensor& indices, const Tensor& weight);
// input [rows, ...] with source's row i added at row indices[i] (a 1-D integer tensor), in
// float64.
Tensor index_add_reference(const Tensor& input, const Tensor& indices, const Tensor& source);
// index of the first maximum of each row of [N, C], as f64
Tensor argmax_reference(const Tensor& src);
// relu then max pooling (kernel = stride, no padding).
Tensor relu_max_pool2d_reference(const Tensor& src, int64_t kernel);

}  // namespace mixprec::backend::ref
