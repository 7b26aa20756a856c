// attention_packing_test.cpp: self-attention's packed layouts (ops/attention.cpp).
// split_attention_heads' backward (the unfused route's) must give qkv's one gradient the
// bits of each part's inverse permute (with its scale) joined by cat, with zeros for a part
// that got no gradient; in f32, bf16 and f16, K transposed or not, S and D at odd sizes.
// attention_from_packed_qkv (the fused kernel reading K and V in place from qkv, writing the
// context and qkv's gradient in place) must give the bits of the route it replaced,
// split_attention_heads + scaled_dot_product_attention + permute, forward and backward, in
// every dtype, causal and padded, S not a multiple of the block, D 32 and 40 (and odd D, no
// in-place bf16 pairs), for 1 and 3 threads. Its f64 gradients against finite differences:
// op_harness_test (registry entries) and ops_gradcheck_test.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/finite_diff.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/core/status.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

using test::random_tensor;

struct Shape4 {
  int64_t B, S, H, D;
};

// qkv's gradient as cat of the parts' inverse permutes, built from the public permute and
// cat ops on the parts' gradients (directions[p] for a used part, zeros for an unused one).
Tensor joined_reference(const Shape4& s, const std::array<Tensor, 3>& directions, const std::array<bool, 3>& used,
                        bool k_transposed, double q_scale, DType dt) {
  std::vector<Tensor> blocks;
  for (int p = 0; p < 3; ++p) {
    if (!used[size_t(p)]) {
      blocks.push_back(Tensor::zeros({s.B * s.S, s.H * s.D}, dt));
      continue;
    }
    const bool kt = p == 1 && k_transposed;
    // [B*H, S, D] (or K^T's [B*H, D, S]) back to [B, S, H, D].
    const Tensor four = reshape(directions[size_t(p)], kt ? Shape{s.B, s.H, s.D, s.S} : Shape{s.B, s.H, s.S, s.D});
    const std::array<int, 4> inverse = kt ? std::array<int, 4>{0, 3, 1, 2} : std::array<int, 4>{0, 2, 1, 3};
    blocks.push_back(reshape(permute(four, inverse, p == 0 ? q_scale : 1.0), {s.B * s.S, s.H * s.D}));
  }
  return cat(blocks, 1);
}

TEST(SplitAttentionHeads, BackwardIsEachPartsInversePermuteJoinedByCat) {
  const double q_scale = 1.0 / std::sqrt(40.0);
  for (const Shape4 s : {Shape4{2, 7, 3, 40}, Shape4{3, 65, 2, 32}, Shape4{1, 1, 1, 1}})
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool k_transposed : {false, true})
        for (const std::array<bool, 3> used : {std::array<bool, 3>{true, true, true}, std::array<bool, 3>{true, false, true},
                                               std::array<bool, 3>{false, true, false}}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " B=" + std::to_string(s.B) + " S=" + std::to_string(s.S) +
                       " H=" + std::to_string(s.H) + " D=" + std::to_string(s.D) +
                       (k_transposed ? " k^T" : "") + " used " + std::to_string(used[0]) +
                       std::to_string(used[1]) + std::to_string(used[2]));
          Tensor qkv = random_tensor({s.B * s.S, 3 * s.H * s.D}, 3).to(dt).requires_grad_(true);
          const AttentionOperands o = split_attention_heads(qkv, s.B, s.H, q_scale, k_transposed);
          const std::array<Tensor, 3> parts{o.q, o.k, o.v};
          std::array<Tensor, 3> dirs;
          Tensor loss;
          for (int p = 0; p < 3; ++p) {
            dirs[size_t(p)] = random_tensor(parts[size_t(p)].shape(), uint64_t(10 + p)).to(dt);
            if (!used[size_t(p)]) continue;
            const Tensor term = sum(mul(parts[size_t(p)], dirs[size_t(p)]));
            loss = loss.defined() ? add(loss, term) : term;
          }
          loss.backward();
          const Tensor expected = joined_reference(s, dirs, used, k_transposed, q_scale, dt);
          ASSERT_EQ(qkv.grad().shape(), expected.shape());
          ASSERT_EQ(qkv.grad().dtype(), dt);
          EXPECT_EQ(qkv.grad().to_vector_f64(), expected.to_vector_f64());
        }
}

struct PackedCase {
  int64_t B, S, H, D, block;
  bool causal, padded;
};

std::string name(const PackedCase& c) {
  return "B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) + " H=" + std::to_string(c.H) +
         " D=" + std::to_string(c.D) + " block=" + std::to_string(c.block) + (c.causal ? " causal" : "") +
         (c.padded ? " padded" : "");
}

// Sequence b's last (b + 1) S / 4 keys are padding, and its first key too for b odd.
Tensor packed_mask(int64_t B, int64_t S) {
  std::vector<double> m(size_t(B * S), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = S - (b + 1) * S / 4; j < S; ++j) m[size_t(b * S + j)] = -30000.0;
    if (b % 2 == 1) m[size_t(b * S)] = -30000.0;
  }
  return Tensor::from_vector_f64(m, {B, S}, DType::f32);
}

// The context [B*S, E] and qkv's gradient for the loss sum(context * dir), by the packed op
// or by the three ops it replaces (MultiheadAttention's fused route before it).
std::vector<double> run(const PackedCase& c, DType dt, bool packed) {
  const int64_t E = c.H * c.D;
  const double q_scale = 1.0 / std::sqrt(double(c.D));
  const Tensor mask = c.padded ? packed_mask(c.B, c.S) : Tensor();
  Tensor qkv = random_tensor({c.B * c.S, 3 * E}, 31, -2.0, 2.0).to(dt).requires_grad_(true);
  const Tensor dir = random_tensor({c.B * c.S, E}, 32).to(dt);
  Tensor context;
  if (packed) {
    context = attention_from_packed_qkv(qkv, c.B, c.H, c.causal, q_scale, mask, c.block);
  } else {
    const AttentionOperands h = split_attention_heads(qkv, c.B, c.H, q_scale, /*k_transposed=*/false);
    const Tensor ctx = scaled_dot_product_attention(h.q, h.k, h.v, c.causal, 1.0, c.block, mask);
    context = reshape(permute(reshape(ctx, {c.B, c.H, c.S, c.D}), {0, 2, 1, 3}), {c.B * c.S, E});
  }
  EXPECT_EQ(context.shape(), (Shape{c.B * c.S, E}));
  EXPECT_EQ(context.dtype(), dt);
  sum(mul(context, dir)).backward();
  std::vector<double> all = context.to_vector_f64();
  const std::vector<double> g = qkv.grad().to_vector_f64();
  all.insert(all.end(), g.begin(), g.end());
  return all;
}

TEST(AttentionFromPackedQkv, SameBitsAsSplitFusedAndMergeForwardAndBackward) {
  const std::vector<PackedCase> cases{
      {2, 70, 2, 40, 32, true, false}, {2, 70, 2, 40, 32, false, false}, {3, 67, 2, 32, 64, true, false},
      {3, 67, 2, 32, 16, false, true}, {3, 67, 2, 32, 16, true, true},   {2, 130, 4, 32, 64, true, false},
      {2, 9, 3, 5, 4, false, true},    {1, 1, 1, 2, 64, true, false}};
  const int saved = omp_get_max_threads();
  for (const PackedCase& c : cases)
    for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16})
      for (int threads : {1, 3}) {
        SCOPED_TRACE(name(c) + " " + dtype_name(dt) + " threads=" + std::to_string(threads));
        omp_set_num_threads(threads);
        const std::vector<double> packed = run(c, dt, true), unpacked = run(c, dt, false);
        ASSERT_EQ(packed.size(), unpacked.size());
        size_t first = 0;
        while (first < packed.size() && (packed[first] == unpacked[first] ||
                                         (std::isnan(packed[first]) && std::isnan(unpacked[first]))))
          ++first;
        EXPECT_EQ(first, packed.size()) << "first difference at " << first << ": " << packed[first] << " vs "
                                        << unpacked[first];
      }
  omp_set_num_threads(saved);
}

TEST(AttentionFromPackedQkv, BadArgumentsGiveClearErrors) {
  const Tensor qkv = Tensor::zeros({8, 12});
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { attention_from_packed_qkv(qkv, 3, 2, false, 0.5); }).find("attention_from_packed_qkv"),
            std::string::npos);  // 8 rows are not 3 sequences
  EXPECT_NE(message([&] { attention_from_packed_qkv(qkv, 2, 5, false, 0.5); }).find("[batch x S, 3 x heads x D]"),
            std::string::npos);  // 12 columns are not 3 x 5 heads
  EXPECT_NE(message([&] { attention_from_packed_qkv(Tensor::zeros({8}), 2, 2, false, 0.5); }).find("got"),
            std::string::npos);
  EXPECT_NE(message([&] { attention_from_packed_qkv(qkv, 2, 2, false, 0.0); }).find("q_scale"), std::string::npos);
  EXPECT_NE(message([&] { attention_from_packed_qkv(qkv, 2, 2, false, 0.5, Tensor(), 0); }).find("block"),
            std::string::npos);
  EXPECT_NE(message([&] { attention_from_packed_qkv(qkv, 2, 2, false, 0.5, Tensor::zeros({2, 3})); })
                .find("key_padding"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec
