// ops/attention.cpp: the ops self-attention needs besides matmul, softmax and dropout:
// split_attention_heads (q, k, v out of the fused projection's column blocks, Q's 1/sqrt(D)
// folded into the copy), permute (merging heads), narrow (the Q, K and V row blocks of
// in_proj_weight, for generation's one-token step), attention_softmax (16-bit scores, f32 arithmetic)
// scaled_dot_product_attention (fused: no [S, S] tensor) and attention_from_packed_qkv (the
// same kernel on the fused projection's columns in place), forward and backward. Kernels:
// backend/cpu/layout.h, softmax_rows.h and flash_attention.h.
// Why attention_from_packed_qkv: on MultiheadAttention's fused route, split_attention_heads'
// three permuting copies, the context's permute back to [B*S, E], and in the backward their
// four inverse copies and the gradients' join were ~3-4% of gpt-tiny's amp-bf16 step (perf:
// permute_kernel ~1%, memmove ~2.7%, its serial cat ~1.2%) for no arithmetic; the kernel
// takes strided rows instead, so only Q's scaled copy is left.
#include <cmath>

#include "autograd/node.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/autocast_hook.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

Tensor permute(const Tensor& src_in, const std::array<int, 4>& dims, double scale) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::transpose, src_in);
  if (!src.defined() || src.dim() != 4 || !is_floating(src.dtype()))
    throw Error(Status::invalid_argument("permute: expects a 4-D floating tensor, got " +
                                         (src.defined() ? src.str() : std::string("undefined"))));
  std::array<bool, 4> seen{};
  for (int d : dims) {
    if (d < 0 || d > 3 || seen[size_t(d)])
      throw Error(Status::invalid_argument("permute: dims must be a permutation of 0..3, got (" +
                                           std::to_string(dims[0]) + ", " + std::to_string(dims[1]) +
                                           ", " + std::to_string(dims[2]) + ", " +
                                           std::to_string(dims[3]) + ")"));
    seen[size_t(d)] = true;
  }
  Tensor dst = ops_detail::dispatch_cpu("permute", src.dtype(), [&] { return cpu::permute_forward(src, dims, scale); });
  if (any_requires_grad({&src})) {
    std::array<int, 4> inverse{};
    for (int k = 0; k < 4; ++k) inverse[size_t(dims[size_t(k)])] = k;
    record_op(dst, "permute", {&src}, [inverse, scale](const Tensor& diff_dst) {
      return std::vector<Tensor>{permute(diff_dst, inverse, scale)};
    });
  }
  return dst;
}

Tensor narrow(const Tensor& src_in, int64_t start, int64_t length) {
  const Tensor cast_src = ops_detail::autocast_input(amp::OpId::reshape, src_in);
  if (!cast_src.defined() || cast_src.dim() < 1 || start < 0 || length < 0 ||
      start + length > cast_src.size(0))
    throw Error(Status::invalid_argument(
        "narrow: rows [" + std::to_string(start) + ", " + std::to_string(start + length) +
        ") do not fit " + (cast_src.defined() ? cast_src.str() : std::string("undefined"))));
  const Tensor src = cast_src.is_contiguous() ? cast_src.detach() : cast_src.detach().contiguous();
  Shape shape = src.shape();
  const int64_t rows = shape[0];
  shape[0] = length;
  const int64_t row = rows > 0 ? src.numel() / rows : 0;
  const Tensor rows_view = src.as_strided(shape, contiguous_strides(shape), src.storage_offset() + start * row);
  Tensor dst = ops_detail::route(
      "narrow", src.dtype(), true, [&] { return rows_view.clone(); }, ops_detail::no_kernel,
      [&] { return ref::reorder(rows_view, src.dtype(), MemoryFormat::contiguous); });
  if (any_requires_grad({&cast_src})) {
    const Shape full = cast_src.shape();
    record_op(dst, "narrow", {&cast_src}, [full, start, row](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch_cpu(
          "narrow_backward", diff_dst.dtype(), [&] { return cpu::narrow_rows_backward(diff_dst, full, start, row); })};
    });
  }
  return dst;
}

AttentionOperands split_attention_heads(const Tensor& qkv_in, int64_t B, int64_t H, double q_scale,
                                        bool k_transposed) {
  const Tensor qkv = ops_detail::autocast_input(amp::OpId::transpose, qkv_in);
  if (!qkv.defined() || qkv.dim() != 2 || !is_floating(qkv.dtype()) || B <= 0 || H <= 0 ||
      qkv.size(0) % B != 0 || qkv.size(1) % (3 * H) != 0)
    throw Error(Status::invalid_argument(
        "split_attention_heads: expects a floating [batch x S, 3 x heads x D] tensor for batch " +
        std::to_string(B) + " and " + std::to_string(H) + " heads, got " +
        (qkv.defined() ? qkv.str() : std::string("undefined"))));
  const int64_t S = qkv.size(0) / B, E = qkv.size(1) / 3, D = E / H;
  const DType dt = qkv.dtype();
  ops_detail::AutocastOff cast_already;  // the parts' reshape must not apply reshape's row
  const Tensor src = qkv.is_contiguous() ? qkv.detach() : qkv.detach().contiguous();
  // Part p's columns seen as [B, S, H, D]; its operand is a permuting copy of that view.
  auto part_view = [&](int64_t p) {
    return src.as_strided({B, S, H, D}, {S * 3 * E, 3 * E, D, 1}, src.storage_offset() + p * E);
  };
  constexpr std::array<int, 4> kHeadsFirst{0, 2, 1, 3}, kKeysLast{0, 2, 3, 1};
  const std::array<std::array<int, 4>, 3> perms{kHeadsFirst, k_transposed ? kKeysLast : kHeadsFirst, kHeadsFirst};
  const std::array<double, 3> scales{q_scale, 1.0, 1.0};
  std::array<Tensor, 3> parts;
  for (int p = 0; p < 3; ++p) {
    if (p == 1 && k_transposed) {
      // K^T [B*H, D, S] as a transposed view of K [B*H, S, D]: the scores' matmul reads it
      // with K's rows contiguous, which oneDNN's bf16 batched matmul runs ~1.7x faster at
      // head sizes like 32 than a dense K^T (ONEDNN_VERBOSE, AMD Zen5); the view's values
      // and shape are those of the dense K^T.
      const Tensor k = ops_detail::dispatch_cpu("split_attention_heads", dt,
                                                [&] { return cpu::permute_forward(part_view(p), kHeadsFirst, 1.0); });
      parts[1] = k.as_strided({B * H, D, S}, {S * D, 1, D}, k.storage_offset());
      continue;
    }
    const Tensor four = ops_detail::dispatch_cpu("split_attention_heads", dt, [&] {
      return cpu::permute_forward(part_view(p), perms[size_t(p)], scales[size_t(p)]);
    });
    parts[size_t(p)] = four.reshape({B * H, four.size(2), four.size(3)});
  }
  if (any_requires_grad({&qkv})) {
    // A multi-output node on the single-output engine: each part's node turns its gradient
    // into its [B*S, E] column block and leaves it in `blocks`, then passes a one-element
    // token on to the join node, which the engine runs after every part (it is their
    // common input); the join concatenates the blocks into qkv's gradient.
    auto blocks = std::make_shared<std::array<Tensor, 3>>();
    Tensor join = Tensor::empty({1}, dt);
    record_op(join, "split_attention_heads", {&qkv}, [blocks, B, S, E, dt](const Tensor&) {
      std::vector<Tensor> cols;
      for (auto& b : *blocks) cols.push_back(b.defined() ? b : Tensor::zeros({B * S, E}, dt));
      *blocks = {};
      return std::vector<Tensor>{ops_detail::dispatch_cpu("split_attention_heads_backward", dt, [&] { return cpu::cat_forward(cols, 1); })};
    });
    for (int p = 0; p < 3; ++p) {
      std::array<int, 4> inverse{};
      for (int k = 0; k < 4; ++k) inverse[size_t(perms[size_t(p)][size_t(k)])] = k;
      const Shape four{B, H, parts[size_t(p)].size(1), parts[size_t(p)].size(2)};
      const double scale = scales[size_t(p)];
      record_op(parts[size_t(p)], "split_attention_heads_part", {&join},
                [blocks, p, inverse, four, scale, B, S, E, dt](const Tensor& diff_dst) {
                  const Tensor g = diff_dst.is_contiguous() ? diff_dst : diff_dst.contiguous();
                  (*blocks)[size_t(p)] = ops_detail::dispatch_cpu("split_attention_heads_backward", dt, [&] {
                                           return cpu::permute_forward(g.reshape(four), inverse, scale);
                                         }).reshape({B * S, E});
                  return std::vector<Tensor>{Tensor::zeros({1}, dt)};
                });
    }
  }
  return AttentionOperands{parts[0], parts[1], parts[2]};
}

Tensor attention_softmax(const Tensor& scores_in, bool causal) {
  const Tensor scores = ops_detail::autocast_input(amp::OpId::attention_softmax, scores_in);
  if (!scores.defined() || scores.dim() < 1 || !is_floating(scores.dtype()))
    throw Error(Status::invalid_argument("attention_softmax: expects a floating tensor, got " +
                                         (scores.defined() ? scores.str() : std::string("undefined"))));
  if (causal && (scores.dim() < 2 || scores.size(scores.dim() - 2) != scores.size(scores.dim() - 1)))
    throw Error(Status::invalid_argument("attention_softmax: causal needs [..., S, S] scores, got " + scores.str()));
  const Tensor x = scores.is_contiguous() ? scores.detach() : scores.detach().contiguous();
  const int64_t axis = x.dim() - 1;
  const bool own = x.dtype() != DType::f64;  // f64 (gradchecks): the reference softmax
  Tensor y = ops_detail::route(
      "attention_softmax", x.dtype(), own, [&] { return cpu::softmax_rows_forward(x, causal); }, ops_detail::no_kernel,
      [&] { return causal ? ref::causal_softmax_reference(x).to(x.dtype()) : ref::softmax_forward(x, axis); });
  if (any_requires_grad({&scores})) {
    const Tensor saved = y.detach();
    // y is exactly 0 in hidden columns, so dx = y * (dy - sum(dy * y)) is 0 there too.
    record_op(y, "attention_softmax", {&scores}, [saved, axis, own](const Tensor& diff_dst) {
      const Tensor g = diff_dst.dtype() == saved.dtype() ? diff_dst.contiguous() : diff_dst.to(saved.dtype());
      return std::vector<Tensor>{ops_detail::route(
          "attention_softmax_backward", g.dtype(), own, [&] { return cpu::softmax_rows_backward(saved, g); },
          ops_detail::no_kernel, [&] { return ref::softmax_backward(g, saved, axis); })};
    });
  }
  return y;
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                                    std::optional<double> scale_in, int64_t block, const Tensor& key_padding) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::scaled_dot_product_attention, {q_in, k_in, v_in});
  const Tensor &q0 = in[0], &k0 = in[1], &v0 = in[2];
  for (const Tensor* t : {&q0, &k0, &v0})
    if (!t->defined() || t->dim() != 3 || !is_floating(t->dtype()))
      throw Error(Status::invalid_argument("scaled_dot_product_attention: q, k and v must be 3-D floating tensors "
                                           "[N, S, D], got " +
                                           (t->defined() ? t->str() : std::string("undefined"))));
  if (k0.shape() != std::vector<int64_t>{q0.size(0), q0.size(1), q0.size(2)} || v0.size(0) != q0.size(0) ||
      v0.size(1) != q0.size(1))
    throw Error(Status::invalid_argument("scaled_dot_product_attention: shapes " + shape_str(q0.shape()) + ", " +
                                         shape_str(k0.shape()) + ", " + shape_str(v0.shape()) +
                                         " do not fit (expected q and k [N, S, D], v [N, S, Dv])"));
  if (k0.dtype() != q0.dtype() || v0.dtype() != q0.dtype())
    throw Error(Status::invalid_argument("scaled_dot_product_attention: q, k and v must have one dtype, got " +
                                         std::string(dtype_name(q0.dtype())) + ", " + dtype_name(k0.dtype()) +
                                         ", " + dtype_name(v0.dtype())));
  if (block < 1)
    throw Error(Status::invalid_argument("scaled_dot_product_attention: block must be >= 1, got " +
                                         std::to_string(block)));
  if (key_padding.defined() &&
      (key_padding.dim() != 2 || !is_floating(key_padding.dtype()) || key_padding.size(1) != q0.size(1) ||
       key_padding.size(0) < 1 || q0.size(0) % key_padding.size(0) != 0))
    throw Error(Status::invalid_argument("scaled_dot_product_attention: key_padding " + key_padding.str() +
                                         " is not a floating [B, S] mask with S = " + std::to_string(q0.size(1)) +
                                         " and B dividing N = " + std::to_string(q0.size(0))));
  const double scale = scale_in ? *scale_in : 1.0 / std::sqrt(double(q0.size(2)));
  if (!(scale > 0.0) || !std::isfinite(scale))
    throw Error(Status::invalid_argument("scaled_dot_product_attention: scale must be a finite number > 0, got " +
                                         std::to_string(scale)));
  cpu::FlashAttention saved{q0.detach().contiguous(),
                            k0.detach().contiguous(),
                            v0.detach().contiguous(),
                            key_padding.defined() ? key_padding.detach().contiguous() : Tensor(),
                            Tensor(),
                            Tensor(),
                            causal,
                            scale,
                            block};
  ops_detail::dispatch_cpu("scaled_dot_product_attention", q0.dtype(), [&] { cpu::flash_attention_forward(saved); });
  Tensor out = saved.out;
  if (any_requires_grad({&q0, &k0, &v0})) {
    saved.out = out.detach();
    record_op(out, "scaled_dot_product_attention", {&q0, &k0, &v0}, [saved](const Tensor& d_out) {
      return ops_detail::dispatch_cpu("scaled_dot_product_attention_backward", d_out.dtype(),
                                      [&] { return cpu::flash_attention_backward(saved, d_out); });
    });
  }
  return out;
}

Tensor attention_from_packed_qkv(const Tensor& qkv_in, int64_t B, int64_t H, bool causal, double q_scale,
                                 const Tensor& key_padding, int64_t block) {
  const Tensor qkv = ops_detail::autocast_input(amp::OpId::scaled_dot_product_attention, qkv_in);
  if (!qkv.defined() || qkv.dim() != 2 || !is_floating(qkv.dtype()) || B <= 0 || H <= 0 || qkv.size(0) < 1 ||
      qkv.size(1) < 1 || qkv.size(0) % B != 0 || qkv.size(1) % (3 * H) != 0)
    throw Error(Status::invalid_argument(
        "attention_from_packed_qkv: expects a non-empty floating [batch x S, 3 x heads x D] tensor for batch " +
        std::to_string(B) + " and " + std::to_string(H) + " heads, got " +
        (qkv.defined() ? qkv.str() : std::string("undefined"))));
  const int64_t S = qkv.size(0) / B, E = qkv.size(1) / 3, D = E / H;
  if (!(q_scale > 0.0) || !std::isfinite(q_scale))
    throw Error(Status::invalid_argument("attention_from_packed_qkv: q_scale must be a finite number > 0, got " +
                                         std::to_string(q_scale)));
  if (block < 1)
    throw Error(Status::invalid_argument("attention_from_packed_qkv: block must be >= 1, got " +
                                         std::to_string(block)));
  if (key_padding.defined() && (key_padding.dim() != 2 || !is_floating(key_padding.dtype()) ||
                                key_padding.size(0) != B || key_padding.size(1) != S))
    throw Error(Status::invalid_argument("attention_from_packed_qkv: key_padding " + key_padding.str() +
                                         " is not a floating [" + std::to_string(B) + ", " + std::to_string(S) +
                                         "] mask"));
  const DType dt = qkv.dtype();
  const Tensor src = qkv.is_contiguous() ? qkv.detach() : qkv.detach().contiguous();
  // Head h of batch b of part p (0 Q, 1 K, 2 V): rows b S .. b S + S - 1 of qkv, columns
  // p E + h D .., as a [B, H, S, D] view the kernel reads in place.
  const auto part = [&](int64_t p) {
    return src.as_strided({B, H, S, D}, {S * 3 * E, D, 3 * E, 1}, src.storage_offset() + p * E);
  };
  // Q is still a copy: scaled, then rounded to the dtype before the products, as
  // split_attention_heads' q (the same kernel and bits). Scaling inside the kernel would round
  // once less: other bits wherever q_scale is not a power of two (D = 32).
  const Tensor q = ops_detail::dispatch_cpu("attention_from_packed_qkv", dt, [&] {
    return cpu::permute_forward(part(0), {0, 1, 2, 3}, q_scale);
  });
  const Tensor merged = Tensor::empty({B * S, E}, dt);
  // The context's head h of batch b: columns h D .. of rows b S .., written in place.
  const auto heads_of = [B, H, S, D, E](const Tensor& t) {
    return t.as_strided({B, H, S, D}, {S * E, D, E, 1}, t.storage_offset());
  };
  cpu::FlashAttention saved{q,
                            part(1),
                            part(2),
                            key_padding.defined() ? key_padding.detach().contiguous() : Tensor(),
                            heads_of(merged.detach()),
                            Tensor(),
                            causal,
                            1.0,
                            block};
  ops_detail::dispatch_cpu("attention_from_packed_qkv", dt, [&] { cpu::flash_attention_forward(saved); });
  Tensor out = merged;
  if (any_requires_grad({&qkv})) {
    record_op(out, "attention_from_packed_qkv", {&qkv}, [saved, heads_of, B, S, H, D, E, q_scale, dt](const Tensor& d_out) {
      // qkv's gradient in one tensor: dQ (times q_scale, the copy's chain rule), dK and dV
      // written by the kernel into their column blocks.
      Tensor grad = Tensor::empty({B * S, 3 * E}, dt);
      const auto block_of = [&](int64_t p) {
        return grad.as_strided({B, H, S, D}, {S * 3 * E, D, 3 * E, 1}, grad.storage_offset() + p * E);
      };
      const Tensor g = d_out.is_contiguous() ? d_out : d_out.contiguous();
      ops_detail::dispatch_cpu("attention_from_packed_qkv_backward", dt, [&] {
        return cpu::flash_attention_backward(saved, heads_of(g),
                                             cpu::FlashGradients{block_of(0), block_of(1), block_of(2), q_scale});
      });
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

}  // namespace mixprec
