// attention.cpp: nn::MultiheadAttention (self-attention, batch_first, no mask) and the two
// layout steps it needs that ops.h lacks: taking rows of a parameter (the Q, K and V blocks
// of in_proj_weight) and a permuting copy that splits and merges heads. Both are recorded
// with autograd here; the matrix products, softmax and dropout are the public ops, so
// autocast lowers the products and keeps the softmax in f32.
// Letters: B batch, S sequence, E embed dim, H heads, D = E / H.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "autograd/node.h"
#include "backend/cpu/softmax_rows.h"
#include "core/convert.h"
#include "mixprec/nn_attention.h"
#include "mixprec/ops.h"
#include "mixprec/ops_extra.h"
#include "mixprec/status.h"

namespace mixprec::nn {

namespace {

// Below this many elements the OpenMP fork costs more than the copy.
constexpr int64_t kParallelMin = int64_t(1) << 15;

using Perm = std::array<int, 4>;

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

// dst[i0, i1, i2, i3] = src at sum(i_k * stride[k]) for dst of shape `shape` (contiguous);
// `stride` are src's strides reordered to dst's dims. Elements move bit for bit. When dst's
// last dim is strided in src but its third is not (a transpose of the last two dims, K^T),
// the (i2, i3) plane is copied in square tiles so that reads and writes both stay in cache.
template <typename T>
void permute_kernel(const T* src, T* dst, const Shape& shape, const std::array<int64_t, 4>& stride) {
  const int64_t n0 = shape[0], n1 = shape[1], n2 = shape[2], n3 = shape[3];
  const bool parallel = n0 * n1 * n2 * n3 > kParallelMin;
  if (stride[3] != 1 && stride[2] == 1) {
    constexpr int64_t kTile = 16;
#pragma omp parallel for collapse(2) if (parallel)
    for (int64_t i0 = 0; i0 < n0; ++i0)
      for (int64_t i1 = 0; i1 < n1; ++i1) {
        const T* s = src + i0 * stride[0] + i1 * stride[1];
        T* d = dst + (i0 * n1 + i1) * n2 * n3;
        for (int64_t a = 0; a < n2; a += kTile)
          for (int64_t b = 0; b < n3; b += kTile)
            for (int64_t i2 = a; i2 < std::min(a + kTile, n2); ++i2)
              for (int64_t i3 = b; i3 < std::min(b + kTile, n3); ++i3)
                d[i2 * n3 + i3] = s[i2 + i3 * stride[3]];
      }
    return;
  }
#pragma omp parallel for collapse(2) if (parallel)
  for (int64_t i0 = 0; i0 < n0; ++i0)
    for (int64_t i1 = 0; i1 < n1; ++i1)
      for (int64_t i2 = 0; i2 < n2; ++i2) {
        const T* s = src + i0 * stride[0] + i1 * stride[1] + i2 * stride[2];
        T* d = dst + ((i0 * n1 + i1) * n2 + i2) * n3;
        if (stride[3] == 1) {
          std::memcpy(d, s, size_t(n3) * sizeof(T));
        } else {
          for (int64_t i3 = 0; i3 < n3; ++i3) d[i3] = s[i3 * stride[3]];
        }
      }
}

// dst *= scale in place, rounded once to dst's dtype: blocks go through f32 (f64 stays f64)
// with the library's vectorised conversions.
void scale_in_place(Tensor& dst, double scale) {
  const int64_t n = dst.numel();
  if (dst.dtype() == DType::f64) {
    double* p = dst.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) p[i] *= scale;
    return;
  }
  constexpr int64_t kBlock = 4096;
  const size_t es = dtype_size(dst.dtype());
  char* base = static_cast<char*>(dst.data());
  const float f = float(scale);
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t off = 0; off < n; off += kBlock) {
    float buf[kBlock];
    const int64_t len = std::min(kBlock, n - off);
    convert_elements(base + off * int64_t(es), dst.dtype(), buf, DType::f32, len);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) buf[i] *= f;
    convert_elements(buf, DType::f32, base + off * int64_t(es), dst.dtype(), len);
  }
}

// scale * src.permute(perm) as a contiguous tensor; src is 4-D and floating, any strides.
Tensor permute_forward(const Tensor& src, const Perm& perm, double scale) {
  Shape shape(4);
  std::array<int64_t, 4> stride{};
  for (int k = 0; k < 4; ++k) {
    shape[size_t(k)] = src.size(perm[size_t(k)]);
    stride[size_t(k)] = src.strides()[size_t(perm[size_t(k)])];
  }
  Tensor dst = Tensor::empty(shape, src.dtype());
  if (dst.numel() == 0) return dst;
  switch (dtype_size(src.dtype())) {  // a copy moves bits: only the element size matters
    case 2:
      permute_kernel(static_cast<const uint16_t*>(src.data()), dst.data_ptr<uint16_t>(), shape, stride);
      break;
    case 4:
      permute_kernel(static_cast<const uint32_t*>(src.data()), dst.data_ptr<uint32_t>(), shape, stride);
      break;
    default:
      permute_kernel(static_cast<const uint64_t*>(src.data()), dst.data_ptr<uint64_t>(), shape, stride);
  }
  if (scale != 1.0) scale_in_place(dst, scale);
  return dst;
}

// Differentiable scale * src.permute(perm) (a copy, contiguous). The gradient is the
// inverse permutation of diff_dst, times the same scale.
Tensor permute_copy(const Tensor& src, const Perm& perm, double scale = 1.0) {
  if (src.dim() != 4 || !is_floating(src.dtype()))
    bad("MultiheadAttention: permute expects a 4-D floating tensor, got " + src.str());
  Tensor dst = permute_forward(src, perm, scale);
  if (any_requires_grad({&src})) {
    Perm inverse{};
    for (int k = 0; k < 4; ++k) inverse[size_t(perm[size_t(k)])] = k;
    record_op(dst, "permute", {&src}, [inverse, scale](const Tensor& diff_dst) {
      return std::vector<Tensor>{permute_copy(diff_dst, inverse, scale)};
    });
  }
  return dst;
}

// Differentiable src[start : start + count] along dim 0 (a contiguous copy). The gradient
// is zero outside those rows.
Tensor narrow_rows(const Tensor& src_in, int64_t start, int64_t count) {
  const Tensor src = src_in.is_contiguous() ? src_in.detach() : src_in.detach().contiguous();
  Shape shape = src.shape();
  const int64_t rows = shape[0];
  shape[0] = count;
  const int64_t row = rows > 0 ? src.numel() / rows : 0;
  Tensor dst = src.as_strided(shape, contiguous_strides(shape), src.storage_offset() + start * row)
                   .clone();
  if (any_requires_grad({&src_in})) {
    const Shape full = src_in.shape();
    record_op(dst, "narrow", {&src_in}, [full, start, row](const Tensor& diff_dst) {
      const Tensor g = diff_dst.is_contiguous() ? diff_dst : diff_dst.contiguous();
      Tensor out = Tensor::zeros(full, g.dtype());
      const size_t es = dtype_size(g.dtype());
      std::memcpy(static_cast<char*>(out.data()) + size_t(start * row) * es, g.data(),
                  size_t(g.numel()) * es);
      return std::vector<Tensor>{out};
    });
  }
  return dst;
}

// softmax over the last dim of 16-bit scores with f32 arithmetic and 16-bit probabilities
// (backend/cpu/softmax_rows.h). The fp32-policy route gives the same forward values (f32
// softmax, then the cast to the matmul's dtype rounds them once the same way) but moves the
// [B*H, S, S] tensor through two casts each way; backward here works from the rounded
// probabilities, as a 16-bit softmax in PyTorch's CPU autocast does.
Tensor attention_softmax(const Tensor& scores) {
  const Tensor x = scores.is_contiguous() ? scores.detach() : scores.detach().contiguous();
  Tensor y = backend::cpu::softmax_rows_forward(x);
  if (any_requires_grad({&scores})) {
    const Tensor saved = y.detach();
    record_op(y, "attention_softmax", {&scores}, [saved](const Tensor& diff_dst) {
      const Tensor g = diff_dst.dtype() == saved.dtype() ? diff_dst.contiguous() : diff_dst.to(saved.dtype());
      return std::vector<Tensor>{backend::cpu::softmax_rows_backward(saved, g)};
    });
  }
  return y;
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, double dropout_,
                                       bool bias)
    : embed_dim(embed_dim_), num_heads(num_heads_), head_dim(0), dropout(dropout_) {
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

Tensor MultiheadAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != embed_dim)
    bad("MultiheadAttention: input " + shape_str(x.shape()) + " does not fit (expected [B, S, " +
        std::to_string(embed_dim) + "])");
  const int64_t B = x.size(0), S = x.size(1), E = embed_dim, H = num_heads, D = head_dim;
  const Tensor tokens = reshape(x, {B * S, E});
  // One projection per block of in_proj rows (Q, K, V), each [B*S, E] -> [B, S, H, D]: the
  // same dot products as one [B*S, 3E] product, but slicing the [3E, E] weight (backward: a
  // zero-padded [3E, E] gradient per block) is cheaper than slicing the [B*S, 3E] output.
  auto project = [&](int64_t part) {
    const Tensor w = narrow_rows(in_proj_weight, part * E, E);
    const Tensor b = in_proj_bias.defined() ? narrow_rows(in_proj_bias, part * E, E) : Tensor();
    return reshape(linear(tokens, w, b), {B, S, H, D});
  };
  // PyTorch scales Q (not the scores) by 1 / sqrt(D): fewer elements, folded into the copy.
  const Tensor q = reshape(permute_copy(project(0), {0, 2, 1, 3}, 1.0 / std::sqrt(double(D))),
                           {B * H, S, D});
  const Tensor k_t = reshape(permute_copy(project(1), {0, 2, 3, 1}), {B * H, D, S});
  const Tensor v = reshape(permute_copy(project(2), {0, 2, 1, 3}), {B * H, S, D});
  const Tensor scores = matmul(q, k_t);  // [B*H, S, S]
  Tensor weights = scores.dtype() == DType::bf16 || scores.dtype() == DType::f16
                       ? attention_softmax(scores)
                       : softmax(scores, -1);
  if (dropout > 0.0) weights = mixprec::dropout(weights, dropout, is_training());
  const Tensor context = reshape(matmul(weights, v), {B, H, S, D});
  const Tensor merged = reshape(permute_copy(context, {0, 2, 1, 3}), {B * S, E});
  return reshape((*out_proj)(merged), {B, S, E});
}

Tensor linear_over_tokens(Linear& layer, const Tensor& input) {
  if (input.dim() != 3)
    bad("linear_over_tokens: input " + shape_str(input.shape()) + " is not [B, S, features]");
  const int64_t B = input.size(0), S = input.size(1);
  const Tensor out = layer(reshape(input, {B * S, input.size(2)}));
  return reshape(out, {B, S, out.size(1)});
}

}  // namespace mixprec::nn
