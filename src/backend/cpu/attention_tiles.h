// backend/cpu/attention_tiles.h: scaled_dot_product_attention's kernel (ops/attention.cpp):
// attention over q, k, v [N, S, D] one tile of query rows at a time. A tile is `block` query
// rows of every head against all S keys: their scores [N, rows, S] (the only score memory
// there is), softmax rows in C = float (f32/bf16/f16 inputs) or double (f64), then P V. The
// forward keeps each row's log-sum-exp; backward recomputes each tile's probabilities from it
// (FlashAttention's recomputation), so memory grows with S, not S^2. With causal, query row
// i sees keys 0..i. The products are the caller's matmul (the backends' matmul, chosen by the
// ops layer as for matmul itself).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec::backend::cpu {

// a x b with optional transposes, batched over the leading dim: what the tiles multiply with.
using AttentionMatmul = std::function<Tensor(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b)>;

struct AttentionTiles {
  Tensor q, k, v;    // [N, S, D], [N, S, D], [N, S, Dv]: contiguous, one dtype
  Tensor out, lse;   // forward's: out [N, S, Dv] in v's dtype; lse [N, S] in C
  bool causal = false;
  double scale = 1.0;
  int64_t block = 128;
};

// Fills t.out and t.lse.
void attention_tiles_forward(AttentionTiles& t, const AttentionMatmul& mm);
// {dq, dk, dv} in the inputs' dtype, for the gradient d_out of t.out.
std::vector<Tensor> attention_tiles_backward(const AttentionTiles& t, const Tensor& d_out, const AttentionMatmul& mm);

}  // namespace mixprec::backend::cpu
