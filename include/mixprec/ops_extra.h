// ops_extra.h: normalisation, GELU, dropout, pow, cat and stack (PyTorch's F.layer_norm,
// F.batch_norm, F.gelu, F.dropout, torch.pow, torch.cat, torch.stack). Same contract as
// ops.h: autograd is recorded when an input requires grad, dtypes follow the autocast
// policy table, and errors throw mixprec::Error naming the op and the shapes.
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec {

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

}  // namespace mixprec
