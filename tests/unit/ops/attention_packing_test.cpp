// attention_packing_test.cpp: self-attention's packed layouts (ops/attention.cpp).
// split_attention_heads' backward writes each part's gradient straight into its column
// block of qkv's one gradient: its bits must be those of the construction it replaced, each
// part's inverse permute (with its scale) joined by cat, with zeros for a part that got no
// gradient; in f32, bf16 and f16, K transposed or not, S and D at odd sizes.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "common/finite_diff.h"
#include "mixprec/autograd/autograd.h"
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

TEST(SplitAttentionHeads, BackwardWritesEachPartIntoItsColumnBlockWithCatsBits) {
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

}  // namespace
}  // namespace mixprec
