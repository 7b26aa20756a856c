// registry.cpp: the op list (see registry.h), one block per op family in the order of
// src/ops. Shapes are small (finite differences call an op twice per input element) and
// value ranges keep each op away from its kinks and poles (log and div get inputs in
// [0.5, 1.5); relu and max pooling get random values, which tie or sit at 0 with
// probability ~0).
// Longer than 400 lines: it is the one list the op harness walks (an entry per op and
// variant); split by family it would need its own index of files to stay one list.
#include "ops/registry.h"

#include <algorithm>
#include <cmath>

#include "backend/kernels.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"
#include "ops/autocast_hook.h"

namespace mixprec::registry {

namespace {

using V = const std::vector<Tensor>&;
namespace ref = backend::ref;

// The reference sees the op's input values exactly, widened to f64 (ref kernels compute
// in f64 and write their input's dtype, so they are fed f64).
Tensor w(const Tensor& x) {
  return x.defined() ? Tensor::from_vector_f64(x.to_vector_f64(), x.shape(), DType::f64) : x;
}

InputSpec in(Shape shape, double low = -1.0, double high = 1.0) {
  return InputSpec{std::move(shape), low, high, true, 0};
}
InputSpec target(int64_t n, int64_t classes) { return InputSpec{{n}, 0, 0, false, classes}; }

constexpr uint64_t kDropoutSeed = 1234;
constexpr double kDropoutP = 0.3;

std::vector<OpEntry> make_registry() {
  using amp::OpId;
  using backend::BinaryOp;
  using backend::ReduceOp;
  using backend::UnaryOp;
  std::vector<OpEntry> r;
  auto add = [&](OpEntry e) { r.push_back(std::move(e)); };
  auto binary = [](BinaryOp op) { return [op](V x) { return ref::binary(op, w(x[0]), w(x[1])); }; };

  // ---- layout.cpp ----
  add({"cast", std::nullopt, {in({3, 4})}, [](V x) { return cast(x[0], DType::f64); },
       [](V x) { return w(x[0]); }});
  add({"to_memory_format", std::nullopt, {in({2, 3, 4, 5})},
       [](V x) { return to_memory_format(x[0], MemoryFormat::channels_last); },
       [](V x) { return w(x[0]); }});
  add({"reshape", OpId::reshape, {in({3, 4})}, [](V x) { return reshape(x[0], {4, -1}); },
       [](V x) { return w(x[0]).reshape({4, 3}); }});
  add({"flatten", OpId::flatten, {in({2, 3, 4})}, [](V x) { return flatten(x[0]); },
       [](V x) { return w(x[0]).reshape({2, 12}); }});
  add({"transpose", OpId::transpose, {in({3, 4, 5})}, [](V x) { return transpose(x[0], 0, 2); },
       [](V x) { return ref::permute_reference(x[0], {2, 1, 0}); }});

  // ---- attention.cpp ----
  add({"permute", OpId::transpose, {in({2, 3, 4, 5})},
       [](V x) { return permute(x[0], {0, 2, 3, 1}, 0.5); },
       [](V x) { return ref::linear_scale(ref::permute_reference(x[0], {0, 2, 3, 1}), 0.5, 0.0); }});
  // split_attention_heads, one entry per output: qkv [B*S, 3E] = [4, 12] for batch 2 and 2
  // heads (S 2, E 4, D 2); the reference takes part p's columns as [B, S, H, D] and permutes
  // them in f64. Checking one output also checks that the others' column blocks get zeros.
  auto heads_reference = [](int64_t part, std::vector<int64_t> perm, double scale) {
    return [part, perm, scale](V x) {
      const Tensor cols = w(x[0]).as_strided({2, 2, 2, 2}, {24, 12, 2, 1}, part * 4).contiguous();
      const Tensor p = ref::linear_scale(ref::permute_reference(cols, perm), scale, 0.0);
      return p.reshape({4, p.size(2), p.size(3)});
    };
  };
  add({"split_attention_heads.q", OpId::transpose, {in({4, 12})},
       [](V x) { return split_attention_heads(x[0], 2, 2, 0.5).q; }, heads_reference(0, {0, 2, 1, 3}, 0.5)});
  add({"split_attention_heads.k", OpId::transpose, {in({4, 12})},
       [](V x) { return split_attention_heads(x[0], 2, 2, 0.5).k; }, heads_reference(1, {0, 2, 3, 1}, 1.0)});
  OpEntry heads_vk{"split_attention_heads.v_untransposed_k", OpId::transpose, {in({4, 12})},
       [](V x) {
         const AttentionOperands o = split_attention_heads(x[0], 2, 2, 0.5, /*k_transposed=*/false);
         return mixprec::add(o.v, mixprec::mul(o.k, 2.0));  // both parts reach the gradient
       },
       [](V x) {
         const Tensor cols_v = w(x[0]).as_strided({2, 2, 2, 2}, {24, 12, 2, 1}, 8).contiguous();
         const Tensor cols_k = w(x[0]).as_strided({2, 2, 2, 2}, {24, 12, 2, 1}, 4).contiguous();
         const std::vector<double> v = ref::permute_reference(cols_v, {0, 2, 1, 3}).to_vector_f64();
         const std::vector<double> k = ref::permute_reference(cols_k, {0, 2, 1, 3}).to_vector_f64();
         std::vector<double> sum(v.size());
         for (size_t i = 0; i < v.size(); ++i) sum[i] = v[i] + 2.0 * k[i];
         return Tensor::from_vector_f64(sum, {4, 2, 2}, DType::f64);
       }};
  heads_vk.also_consults = {OpId::add, OpId::mul};
  add(heads_vk);
  add({"narrow", OpId::reshape, {in({5, 3})}, [](V x) { return narrow(x[0], 1, 3); },
       [](V x) { return w(x[0]).reshape({15}).as_strided({3, 3}, {3, 1}, 3).contiguous(); }});
  add({"attention_softmax", OpId::attention_softmax, {in({2, 3, 5}, -2.0, 2.0)},
       [](V x) { return attention_softmax(x[0]); },
       [](V x) { return ref::softmax_forward(w(x[0]), 2); }});
  // Causal: [2, 4, 4] blocks, row i sees columns 0..i (the reference: a -inf upper triangle).
  add({"attention_softmax.causal", OpId::attention_softmax, {in({2, 4, 4}, -2.0, 2.0)},
       [](V x) { return attention_softmax(x[0], /*causal=*/true); },
       [](V x) { return ref::causal_softmax_reference(w(x[0])); }});

  // Blocks of 2 queries and 2 keys over S = 5 (the last block is short), Dv != D: the reference
  // is the plain softmax(scale q k^T + bias) v in f64 with the whole [S, S] score matrix. The
  // padded variant: 2 sequences x 2 heads, the first padded at keys 3-4 (its last key block is
  // skipped), the second at keys 0-1 (its first).
  const std::vector<double> padding{0, 0, 0, -30000, -30000, -30000, -30000, 0, 0, 0};
  auto sdpa_reference = [padding](bool causal, bool padded) {
    return [causal, padded, padding](V x) {
      const Tensor q = w(x[0]), k = w(x[1]), v = w(x[2]);
      const int64_t N = q.size(0), S = q.size(1), D = q.size(2), Dv = v.size(2);
      const std::vector<double> qv = q.to_vector_f64(), kv = k.to_vector_f64(), vv = v.to_vector_f64();
      std::vector<double> out(static_cast<size_t>(N * S * Dv), 0.0), p(static_cast<size_t>(S));
      const double scale = 1.0 / std::sqrt(double(D));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < S; ++i) {
          const int64_t seen = causal ? i + 1 : S;
          double m = -1e300, sum = 0.0;
          for (int64_t j = 0; j < seen; ++j) {
            double dot = 0.0;
            for (int64_t d = 0; d < D; ++d) dot += qv[size_t((n * S + i) * D + d)] * kv[size_t((n * S + j) * D + d)];
            p[size_t(j)] = scale * dot + (padded ? padding[size_t((n / 2) * S + j)] : 0.0);
            m = std::max(m, p[size_t(j)]);
          }
          for (int64_t j = 0; j < seen; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
          for (int64_t j = 0; j < seen; ++j)
            for (int64_t d = 0; d < Dv; ++d)
              out[size_t((n * S + i) * Dv + d)] += p[size_t(j)] / sum * vv[size_t((n * S + j) * Dv + d)];
        }
      return Tensor::from_vector_f64(out, {N, S, Dv}, DType::f64);
    };
  };
  add({"scaled_dot_product_attention", OpId::scaled_dot_product_attention, {in({2, 5, 3}), in({2, 5, 3}), in({2, 5, 4})},
       [](V x) { return scaled_dot_product_attention(x[0], x[1], x[2], false, std::nullopt, 2); },
       sdpa_reference(false, false)});
  add({"scaled_dot_product_attention.causal", OpId::scaled_dot_product_attention,
       {in({2, 5, 3}), in({2, 5, 3}), in({2, 5, 4})},
       [](V x) { return scaled_dot_product_attention(x[0], x[1], x[2], true, std::nullopt, 2); },
       sdpa_reference(true, false)});
  add({"scaled_dot_product_attention.padded", OpId::scaled_dot_product_attention,
       {in({4, 5, 3}), in({4, 5, 3}), in({4, 5, 2})},
       [padding](V x) {
         const Tensor mask = Tensor::from_vector_f64(padding, {2, 5}, DType::f32);
         return scaled_dot_product_attention(x[0], x[1], x[2], false, std::nullopt, 2, mask);
       },
       sdpa_reference(false, true)});

  // attention_from_packed_qkv on qkv [B*S, 3E] = [10, 18] (batch 2, S 5, 2 heads of D 3),
  // blocks of 2: sdpa_reference on the f64 q, k, v taken from qkv's column blocks, its
  // context merged back to [B*S, E]. q_scale 1/sqrt(D) with the kernel's scale 1 is the
  // reference's softmax(q k^T / sqrt(D)).
  auto packed_reference = [sdpa_reference](bool causal, bool padded) {
    return [causal, padded, sdpa_reference](V x) {
      std::vector<Tensor> parts;
      for (int64_t p = 0; p < 3; ++p) {
        const Tensor cols = w(x[0]).as_strided({2, 5, 2, 3}, {90, 18, 3, 1}, p * 6).contiguous();
        parts.push_back(ref::permute_reference(cols, {0, 2, 1, 3}).reshape({4, 5, 3}));
      }
      const Tensor context = sdpa_reference(causal, padded)(parts).reshape({2, 2, 5, 3});
      return ref::permute_reference(context, {0, 2, 1, 3}).reshape({10, 6});
    };
  };
  const double packed_scale = 1.0 / std::sqrt(3.0);
  add({"attention_from_packed_qkv", OpId::scaled_dot_product_attention, {in({10, 18})},
       [packed_scale](V x) { return attention_from_packed_qkv(x[0], 2, 2, false, packed_scale, Tensor(), 2); },
       packed_reference(false, false)});
  add({"attention_from_packed_qkv.causal", OpId::scaled_dot_product_attention, {in({10, 18})},
       [packed_scale](V x) { return attention_from_packed_qkv(x[0], 2, 2, true, packed_scale, Tensor(), 2); },
       packed_reference(true, false)});
  add({"attention_from_packed_qkv.padded", OpId::scaled_dot_product_attention, {in({10, 18})},
       [packed_scale, padding](V x) {
         const Tensor mask = Tensor::from_vector_f64(padding, {2, 5}, DType::f32);
         return attention_from_packed_qkv(x[0], 2, 2, false, packed_scale, mask, 2);
       },
       packed_reference(false, true)});

  // ---- embedding.cpp (index 3 repeats: the backward must sum both rows' gradients) ----
  add({"embedding", OpId::embedding, {InputSpec{{2, 3}, 0, 0, false, 5}, in({5, 4})},
       [](V x) { return embedding(x[0], x[1]); }, [](V x) { return ref::embedding_reference(x[0], w(x[1])); }});
  // index_add: embedding's adjoint (row 1 named twice: both source rows add up there).
  add({"index_add", OpId::index_add, {in({4, 3}), in({3, 3})},
       [](V x) { return index_add(x[0], Tensor::from_vector_i64({1, 3, 1}, {3}), x[1]); },
       [](V x) { return ref::index_add_reference(w(x[0]), Tensor::from_vector_i64({1, 3, 1}, {3}), w(x[1])); }});

  // ---- elementwise.cpp ----
  // The ops of one tensor with a UnaryOp kernel and of two with a BinaryOp kernel (b
  // broadcasts over a's rows): one entry per MIXPREC_UNARY_OP and MIXPREC_BINARY_OP line.
#define MIXPREC_OP(name, policy, torch113)
#define MIXPREC_UNARY_OP(name, policy, low, high, torch113)                                 \
  add({#name, OpId::name, {in({3, 4}, low, high)}, [](V x) { return mixprec::name(x[0]); }, \
       [](V x) { return ref::unary(UnaryOp::name, w(x[0])); }});
#define MIXPREC_BINARY_OP(name, policy, low, high, torch113)                                            \
  add({#name, OpId::name, {in({3, 4}), in({4}, low, high)}, [](V x) { return mixprec::name(x[0], x[1]); }, \
       binary(BinaryOp::name)});
#include "mixprec/ops/ops.def"
#undef MIXPREC_BINARY_OP
#undef MIXPREC_UNARY_OP
#undef MIXPREC_OP
  add({"mul.scalar", OpId::mul, {in({3, 4})}, [](V x) { return mul(x[0], 1.5); },
       [](V x) { return ref::linear_scale(w(x[0]), 1.5, 0.0); }});
  add({"add.scalar", OpId::add, {in({3, 4})}, [](V x) { return mixprec::add(x[0], 0.25); },
       [](V x) { return ref::linear_scale(w(x[0]), 1.0, 0.25); }});
  add({"pow", OpId::pow, {in({3, 4})}, [](V x) { return pow(x[0], 3.0); },
       [](V x) { return ref::pow_reference(x[0], 3.0); }});

  // ---- activation.cpp ----
  add({"relu", OpId::relu, {in({4, 5})}, [](V x) { return relu(x[0]); },
       [](V x) { return ref::relu_forward(w(x[0])); }});
  add({"gelu", OpId::gelu, {in({4, 5}, -3.0, 3.0)}, [](V x) { return gelu(x[0]); },
       [](V x) { return ref::gelu_reference(x[0]); }});
  add({"dropout", OpId::dropout, {in({4, 5})},
       [](V x) {
         manual_seed(kDropoutSeed);  // the same mask on every call (finite differences)
         return dropout(x[0], kDropoutP, true);
       },
       [](V x) { return ref::dropout_reference(x[0], kDropoutP, kDropoutSeed); }});

  // ---- prelu.cpp: one weight per channel (values both sides of 0) and a single weight ----
  auto prelu_reference = [](V x) {
    const Tensor input = w(x[0]);
    const std::vector<double> v = input.to_vector_f64(), wt = x[1].to_vector_f64();
    const int64_t C = input.dim() >= 2 ? input.size(1) : 1;
    int64_t inner = 1;
    for (int64_t d = 2; d < input.dim(); ++d) inner *= input.size(d);
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const double a = wt.size() == 1 ? wt[0] : wt[size_t((int64_t(i) / inner) % C)];
      out[i] = v[i] > 0 ? v[i] : a * v[i];
    }
    return Tensor::from_vector_f64(out, input.shape(), DType::f64);
  };
  add({"prelu", OpId::prelu, {in({2, 3, 4}), in({3}, 0.1, 0.5)}, [](V x) { return prelu(x[0], x[1]); },
       prelu_reference});
  add({"prelu.single_weight", OpId::prelu, {in({2, 3, 2, 2}), in({1}, 0.1, 0.5)},
       [](V x) { return prelu(x[0], x[1]); }, prelu_reference});

  // ---- matmul.cpp, conv.cpp ----
  add({"linear", OpId::linear, {in({4, 6}), in({5, 6}), in({5})},
       [](V x) { return linear(x[0], x[1], x[2]); },
       [](V x) { return ref::linear_forward(w(x[0]), w(x[1]), w(x[2])); }});
  add({"matmul", OpId::matmul, {in({4, 6}), in({6, 3})}, [](V x) { return matmul(x[0], x[1]); },
       [](V x) { return ref::matmul(w(x[0]), w(x[1]), false, false); }});
  add({"matmul.3d", OpId::bmm, {in({2, 4, 6}), in({2, 6, 3})},
       [](V x) { return matmul(x[0], x[1]); },
       [](V x) { return ref::matmul(w(x[0]), w(x[1]), false, false); }});
  add({"conv2d", OpId::conv2d, {in({2, 3, 5, 5}), in({4, 3, 3, 3}), in({4})},
       [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); },
       [](V x) { return ref::conv2d_forward(w(x[0]), w(x[1]), w(x[2]), {1, 1, 1, 1}); }});

  // ---- blas.cpp (beta and alpha away from 1 so that both scalings are checked; the
  // inputs broadcast to the product where PyTorch allows it) ----
  auto scaled_sum = [](const Tensor& input, const Tensor& product, double beta, double alpha) {
    return ref::binary(BinaryOp::add, ref::linear_scale(w(input), beta, 0.0), ref::linear_scale(product, alpha, 0.0));
  };
  auto mm_ref = [](const Tensor& a, const Tensor& b) { return ref::matmul(w(a), w(b), false, false); };
  auto column = [](const Tensor& v) { return w(v).reshape({v.size(0), 1}); };
  add({"mm", OpId::mm, {in({4, 6}), in({6, 3})}, [](V x) { return mm(x[0], x[1]); },
       [=](V x) { return mm_ref(x[0], x[1]); }});
  add({"mv", OpId::mv, {in({4, 6}), in({6})}, [](V x) { return mv(x[0], x[1]); },
       [=](V x) { return ref::matmul(w(x[0]), column(x[1]), false, false).reshape({4}); }});
  add({"addmm", OpId::addmm, {in({3}), in({4, 6}), in({6, 3})},
       [](V x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); },
       [=](V x) { return scaled_sum(x[0], mm_ref(x[1], x[2]), 0.5, 2.0); }});
  add({"addmv", OpId::addmv, {in({4}), in({4, 6}), in({6})},
       [](V x) { return addmv(x[0], x[1], x[2], 0.5, 2.0); },
       [=](V x) { return scaled_sum(x[0], ref::matmul(w(x[1]), column(x[2]), false, false).reshape({4}), 0.5, 2.0); }});
  add({"addr", OpId::addr, {in({4, 1}), in({4}), in({3})},
       [](V x) { return addr(x[0], x[1], x[2], 0.5, 2.0); },
       [=](V x) { return scaled_sum(x[0], ref::matmul(column(x[1]), w(x[2]).reshape({1, 3}), false, false), 0.5, 2.0); }});
  add({"baddbmm", OpId::baddbmm, {in({1, 4, 3}), in({2, 4, 6}), in({2, 6, 3})},
       [](V x) { return baddbmm(x[0], x[1], x[2], 0.5, 2.0); },
       [=](V x) { return scaled_sum(x[0], mm_ref(x[1], x[2]), 0.5, 2.0); }});
  add({"addbmm", OpId::addbmm, {in({4, 3}), in({2, 4, 6}), in({2, 6, 3})},
       [](V x) { return addbmm(x[0], x[1], x[2], 0.5, 2.0); },
       [=](V x) { return scaled_sum(x[0], ref::reduce(ReduceOp::sum, mm_ref(x[1], x[2]), {0}, false), 0.5, 2.0); }});
  // Four matrices: the order comes from the dynamic programme ((A(BC))D here).
  add({"chain_matmul", OpId::chain_matmul, {in({4, 6}), in({6, 2}), in({2, 5}), in({5, 3})},
       [](V x) { return chain_matmul({x[0], x[1], x[2], x[3]}); },
       [=](V x) { return mm_ref(w(mm_ref(w(mm_ref(x[0], x[1])), x[2])), x[3]); }});

  // ---- conv.cpp's conv1d, conv_transpose.cpp (stride 2 with padding and output padding;
  // the transposed references are backend/ref's direct scatter loops) ----
  add({"conv1d", OpId::conv1d, {in({2, 3, 7}), in({4, 3, 3}), in({4})},
       [](V x) { return conv1d(x[0], x[1], x[2], 2, 1); },
       [](V x) {
         return ref::conv2d_forward(w(x[0]).reshape({2, 3, 1, 7}), w(x[1]).reshape({4, 3, 1, 3}), w(x[2]), {1, 2, 0, 1})
             .reshape({2, 4, 4});
       }});
  // groups and dilation: depthwise and dilated conv2d, grouped + dilated conv1d, conv3d and
  // transposed convolutions (whose dilation 3 > stride 1 case adds output_padding rows the
  // kernel never writes). conv3d's reference is backend/ref's direct 3-D loop.
  add({"conv2d.depthwise", OpId::conv2d, {in({2, 4, 5, 5}), in({4, 1, 3, 3}), in({4})},
       [](V x) { return conv2d(x[0], x[1], x[2], 1, 1, 1, 4); },
       [](V x) { return ref::conv2d_forward(w(x[0]), w(x[1]), w(x[2]), {1, 1, 1, 1, 1, 1, 4}); }});
  add({"conv2d.dilated", OpId::conv2d, {in({1, 2, 7, 6}), in({3, 2, 3, 2}), in({3})},
       [](V x) { return conv2d(x[0], x[1], x[2], 2, 1, 2); },
       [](V x) { return ref::conv2d_forward(w(x[0]), w(x[1]), w(x[2]), {2, 2, 1, 1, 2, 2, 1}); }});
  add({"conv1d.grouped_dilated", OpId::conv1d, {in({2, 4, 9}), in({6, 2, 3}), in({6})},
       [](V x) { return conv1d(x[0], x[1], x[2], 1, 1, 2, 2); },
       [](V x) {
         return ref::conv2d_forward(w(x[0]).reshape({2, 4, 1, 9}), w(x[1]).reshape({6, 2, 1, 3}), w(x[2]),
                                    {1, 1, 0, 1, 1, 2, 2})
             .reshape({2, 6, 7});
       }});
  add({"conv3d", OpId::conv3d, {in({2, 2, 4, 4, 4}), in({3, 2, 2, 3, 3}), in({3})},
       [](V x) { return conv3d(x[0], x[1], x[2], 2, 1); },
       [](V x) { return ref::conv3d_reference(x[0], x[1], x[2], 2, 1); }});
  add({"conv3d.grouped_dilated", OpId::conv3d, {in({1, 4, 5, 4, 4}), in({2, 2, 2, 2, 2}), in({2})},
       [](V x) { return conv3d(x[0], x[1], x[2], 1, 1, 2, 2); },
       [](V x) { return ref::conv3d_reference(x[0], x[1], x[2], 1, 1, 2, 2); }});
  add({"conv_transpose2d.grouped_dilated", OpId::conv_transpose2d, {in({2, 4, 3, 3}), in({4, 1, 3, 3}), in({2})},
       [](V x) { return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1, 2, 2); },
       [](V x) { return ref::conv_transpose2d_reference(x[0], x[1], x[2], 2, 2, 1, 1, 1, 1, 2, 2, 2); }});
  add({"conv_transpose2d.output_padding_past_stride", OpId::conv_transpose2d, {in({1, 2, 3, 3}), in({2, 3, 2, 2})},
       [](V x) { return conv_transpose2d(x[0], x[1], Tensor(), 1, 0, 2, 1, 3); },
       [](V x) { return ref::conv_transpose2d_reference(x[0], x[1], Tensor(), 1, 1, 0, 0, 2, 2, 1, 3, 3); }});
  add({"conv_transpose3d", OpId::conv_transpose3d, {in({2, 2, 2, 3, 3}), in({2, 3, 2, 2, 2}), in({3})},
       [](V x) { return conv_transpose3d(x[0], x[1], x[2], 2, 1, 1); },
       [](V x) { return ref::conv_transpose3d_reference(x[0], x[1], x[2], 2, 1, 1); }});
  add({"conv_transpose3d.grouped_dilated", OpId::conv_transpose3d, {in({1, 4, 3, 2, 2}), in({4, 1, 2, 2, 2})},
       [](V x) { return conv_transpose3d(x[0], x[1], Tensor(), 1, 0, 2, 2, 3); },
       [](V x) { return ref::conv_transpose3d_reference(x[0], x[1], Tensor(), 1, 0, 2, 2, 3); }});
  add({"conv_transpose1d.grouped_dilated", OpId::conv_transpose1d, {in({2, 4, 5}), in({4, 2, 3}), in({4})},
       [](V x) { return conv_transpose1d(x[0], x[1], x[2], 2, 1, 1, 2, 2); },
       [](V x) {
         return ref::conv_transpose2d_reference(w(x[0]).reshape({2, 4, 1, 5}), w(x[1]).reshape({4, 2, 1, 3}), x[2], 1, 2,
                                                0, 1, 0, 1, 2, 1, 2)
             .reshape({2, 4, 12});
       }});
  add({"conv_transpose2d", OpId::conv_transpose2d, {in({2, 3, 4, 4}), in({3, 4, 3, 3}), in({4})},
       [](V x) { return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1); },
       [](V x) { return ref::conv_transpose2d_reference(x[0], x[1], x[2], 2, 2, 1, 1, 1, 1); }});
  add({"conv_transpose2d.no_bias", OpId::conv_transpose2d, {in({1, 2, 3, 3}), in({2, 3, 2, 2})},
       [](V x) { return conv_transpose2d(x[0], x[1]); },
       [](V x) { return ref::conv_transpose2d_reference(x[0], x[1], Tensor(), 1, 1, 0, 0, 0, 0); }});
  add({"conv_transpose1d", OpId::conv_transpose1d, {in({2, 3, 5}), in({3, 4, 3}), in({4})},
       [](V x) { return conv_transpose1d(x[0], x[1], x[2], 2, 1, 1); },
       [](V x) {
         return ref::conv_transpose2d_reference(w(x[0]).reshape({2, 3, 1, 5}), w(x[1]).reshape({3, 4, 1, 3}), x[2], 1, 2,
                                                0, 1, 0, 1)
             .reshape({2, 4, 10});
       }});

  // ---- pooling.cpp, fused_relu_pool.cpp ----
  add({"max_pool2d", OpId::max_pool2d, {in({2, 3, 6, 6})}, [](V x) { return max_pool2d(x[0], 2); },
       [](V x) { return ref::max_pool2d_forward(w(x[0]), backend::Pool2dParams{}).dst; }});
  add({"avg_pool2d", OpId::avg_pool2d, {in({2, 3, 6, 6})},
       [](V x) { return avg_pool2d(x[0], 3, 2, 1); },
       [](V x) { return ref::avg_pool2d_forward(w(x[0]), {3, 3, 2, 2, 1, 1}); }});
  OpEntry rmp{"relu_max_pool2d", OpId::max_pool2d, {in({2, 3, 6, 6})},
              [](V x) { return relu_max_pool2d(x[0], 2); },
              [](V x) { return ref::relu_max_pool2d_reference(x[0], 2); }};
  rmp.also_consults = {OpId::relu};
  add(rmp);
  // src needs no gradient: the fused first-layer kernel's case (others run the composition).
  add({"conv2d_relu_max_pool2d", OpId::conv2d,
       {InputSpec{{2, 3, 6, 6}, -1.0, 1.0, false, 0}, in({16, 3, 3, 3}), in({16})},
       [](V x) { return conv2d_relu_max_pool2d(x[0], x[1], x[2], 1, 1, 2); },
       [](V x) {
         return ref::relu_max_pool2d_reference(ref::conv2d_forward(w(x[0]), w(x[1]), w(x[2]), {1, 1, 1, 1}), 2);
       }});

  // ---- reduce.cpp ----
  add({"sum", OpId::sum, {in({3, 4})}, [](V x) { return sum(x[0], {1}); },
       [](V x) { return ref::reduce(ReduceOp::sum, w(x[0]), {1}, false); }});
  add({"sum.all", OpId::sum, {in({3, 4})}, [](V x) { return sum(x[0]); },
       [](V x) { return ref::reduce(ReduceOp::sum, w(x[0]), {0, 1}, false); }});
  add({"mean", OpId::mean, {in({3, 4})}, [](V x) { return mean(x[0], {0}, true); },
       [](V x) { return ref::reduce(ReduceOp::mean, w(x[0]), {0}, true); }});
  add({"mean.all", OpId::mean, {in({3, 4})}, [](V x) { return mean(x[0]); },
       [](V x) { return ref::reduce(ReduceOp::mean, w(x[0]), {0, 1}, false); }});

  // ---- softmax.cpp, loss.cpp ----
  add({"softmax", OpId::softmax, {in({4, 5}, -2.0, 2.0)}, [](V x) { return softmax(x[0], 1); },
       [](V x) { return ref::softmax_forward(w(x[0]), 1); }});
  add({"log_softmax", OpId::log_softmax, {in({4, 5}, -2.0, 2.0)},
       [](V x) { return log_softmax(x[0], 1); },
       [](V x) { return ref::log_softmax_forward(w(x[0]), 1); }});
  OpEntry nll{"nll_loss", OpId::nll_loss, {in({4, 5}, -3.0, -0.1), target(4, 5)},
              [](V x) { return nll_loss(x[0], x[1]); },
              [](V x) { return ref::nll_loss_mean_reference(x[0], x[1]); }};
  nll.f32_for_half = true;
  add(nll);
  OpEntry ce{"cross_entropy", OpId::cross_entropy, {in({4, 5}, -2.0, 2.0), target(4, 5)},
             [](V x) { return cross_entropy(x[0], x[1]); },
             [](V x) { return ref::cross_entropy_mean_reference(x[0], x[1]); }};
  ce.f32_for_half = true;
  add(ce);
  OpEntry mse{"mse_loss", OpId::mse_loss, {in({4, 5}), in({4, 5})},
              [](V x) { return mse_loss(x[0], x[1]); },
              [](V x) { return ref::mse_loss_mean_reference(x[0], x[1]); }};
  mse.f32_for_half = true;
  add(mse);
  OpEntry am{"argmax", std::nullopt, {in({4, 5})}, [](V x) { return argmax(x[0]); },
             [](V x) { return ref::argmax_reference(x[0]); }};
  am.differentiable = false;
  add(am);

  // ---- norm.cpp ----
  add({"layer_norm", OpId::layer_norm, {in({4, 6}), in({6}, 0.5, 1.5), in({6})},
       [](V x) { return layer_norm(x[0], {6}, x[1], x[2]); },
       [](V x) { return ref::layer_norm_reference(x[0], 6, x[1], x[2], 1e-5); }});
  // add_layer_norm, one entry per output and one for both (their sum: the join's
  // backward with both gradients); x [4, 6], weight, bias [6]. The branch is x with its
  // rows rotated by two, made with autocast off: other values than x, exactly, in x's dtype
  // whatever the case (the autocast table's mixed cases vary the data input against the
  // parameters, and cast by hand), whose gradient reaches x through its own edge. tests/unit/ops/add_layer_norm_test.cpp checks
  // independent branches of other dtypes against the composition.
  const auto branch_of = [](const Tensor& x) {
    ops_detail::AutocastOff as_given;
    return cat({narrow(x, 2, 2), narrow(x, 0, 2)}, 0);
  };
  const auto sum_ref = [](V x) {
    const Tensor r = w(x[0]);
    return ref::binary(BinaryOp::add, r, cat({narrow(r, 2, 2), narrow(r, 0, 2)}, 0));
  };
  const std::vector<InputSpec> aln_in{in({4, 6}), in({6}, 0.5, 1.5), in({6})};
  add({"add_layer_norm.sum", OpId::layer_norm, {in({4, 6})},  // no affine: sum does not read it
       [branch_of](V x) { return add_layer_norm(x[0], branch_of(x[0]), {6}, Tensor(), Tensor()).sum; }, sum_ref});
  add({"add_layer_norm.normed", OpId::layer_norm, aln_in,
       [branch_of](V x) { return add_layer_norm(x[0], branch_of(x[0]), {6}, x[1], x[2]).normed; },
       [sum_ref](V x) { return ref::layer_norm_reference(sum_ref(x), 6, w(x[1]), w(x[2]), 1e-5); }});
  add({"add_layer_norm.both", OpId::layer_norm, aln_in,
       [branch_of](V x) {
         const ResidualLayerNorm r = add_layer_norm(x[0], branch_of(x[0]), {6}, x[1], x[2]);
         ops_detail::AutocastOff as_computed;  // the sum of the two outputs, not add's row
         return mixprec::add(r.sum, r.normed);
       },
       [sum_ref](V x) {
         const Tensor s = sum_ref(x);
         return ref::binary(BinaryOp::add, s, ref::layer_norm_reference(s, 6, w(x[1]), w(x[2]), 1e-5));
       }});
  add({"add_layer_norm.no_branch", OpId::layer_norm, {in({4, 6}), in({6}, 0.5, 1.5), in({6})},
       [](V x) { return add_layer_norm(x[0], Tensor(), {6}, x[1], x[2]).normed; },
       [](V x) { return ref::layer_norm_reference(w(x[0]), 6, w(x[1]), w(x[2]), 1e-5); }});
  add({"batch_norm", OpId::batch_norm, {in({2, 3, 4, 4}), in({3}, 0.5, 1.5), in({3})},
       [](V x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); },
       [](V x) { return ref::batch_norm_train_reference(x[0], x[1], x[2], 1e-5); }});

  // ---- concat.cpp ----
  add({"cat", OpId::cat, {in({2, 3}), in({2, 4})}, [](V x) { return cat({x[0], x[1]}, 1); },
       [](V x) { return ref::cat_reference({x[0], x[1]}, 1); }});
  add({"stack", OpId::stack, {in({2, 3}), in({2, 3})}, [](V x) { return stack({x[0], x[1]}, 1); },
       [](V x) {
         return ref::cat_reference({w(x[0]).reshape({2, 1, 3}), w(x[1]).reshape({2, 1, 3})}, 1);
       }});
  return r;
}

}  // namespace

const std::vector<OpEntry>& all_ops() {
  static const std::vector<OpEntry> ops = make_registry();
  return ops;
}

std::string_view function_of(const OpEntry& e) {
  const std::string_view n = e.name;
  return n.substr(0, n.find('.'));
}

const OpEntry* find_op(std::string_view name) {
  for (const auto& e : all_ops())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace mixprec::registry
