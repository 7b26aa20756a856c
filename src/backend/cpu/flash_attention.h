// backend/cpu/flash_attention.h: scaled_dot_product_attention's fused kernel
// (ops/attention.cpp), the FlashAttention scheme on the CPU (Dao et al. 2022; Dao 2023).
//
// Forward: the queries in blocks of `block` rows; each block meets the key blocks one at a time
// and keeps, per query row, a running max m, a running sum l and an output accumulator O in
// C = float (f32, bf16 and f16 inputs) or double (f64), rescaling them by e^(m_old - m_new)
// whenever a key block raises the max (online softmax). Every score lives only in one
// block x block tile of a thread's scratch, so memory grows with S, not S^2. The forward
// stores each row's log-sum-exp (lse = m + log l, in C).
// Backward: recomputes each tile's probabilities P = e^(s - lse) from the stored lse and
// D = rowsum(dO * O), in two passes so that every gradient element has one owner: over
// (head, key block) for dK and dV (the thread owning a key block accumulates its rows over
// the query blocks), then over (head, query block) for dQ (accumulated over the key blocks).
// Each element's sums run in a fixed order whatever the thread count or schedule, so the
// results are bit-identical run to run and for any number of threads. The price: the
// scores and dP are computed twice (7 block products instead of 5). With at least two heads
// per thread (N >= 2 x threads: gpt-tiny's 64) one thread takes a whole head instead and adds
// dQ's terms in the first pass, in the order the second pass would: 5 products, same bits.
//
// Causal (query i sees keys 0..i): key blocks wholly after a query block's last row are never
// visited (nor query blocks wholly before a key block's first key, backward), and the
// diagonal tiles stop each row at its own position. A key bias (a text classifier's padding
// mask, kPaddingScore = -30000 at padding), less its sequence's largest bias (the same
// softmax; a text of padding only then attends as if unmasked, without -30000 rounding its
// scores), is added to every score of its key; without causal, a key block whose every bias
// is then <= kFlashSkipBias is skipped: its terms e^(s + bias - m) are exactly 0 in f32 and
// f64 unless scores span ~1e4.
// The inner products run on AVX-512 where the CPU has it (cpu_features(); MIXPREC_CPU_DISABLE
// hides it) and in plain loops elsewhere (and for f64).
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// A key block whose biases are all at or below this is skipped (see above).
inline constexpr double kFlashSkipBias = -1e4;

struct FlashAttention {
  Tensor q, k, v;    // [N, S, D], [N, S, D], [N, S, Dv]: contiguous, one floating dtype
  Tensor key_bias;   // undefined, or [B, S] contiguous floating, N % B == 0: added to every score
                     // of key j for the heads n with n / (N / B) == b
  Tensor out, lse;   // forward's: out [N, S, Dv] in q's dtype; lse [N, S] in C
  bool causal = false;
  double scale = 1.0;  // score = scale * q.k (+ bias)
  int64_t block = 64;  // query and key block size, >= 1
};

// Fills t.out and t.lse.
void flash_attention_forward(FlashAttention& t);
// {dq, dk, dv} in the inputs' dtype, for the gradient d_out (contiguous [N, S, Dv], any
// floating dtype) of t.out.
std::vector<Tensor> flash_attention_backward(const FlashAttention& t, const Tensor& d_out);

}  // namespace mixprec::backend::cpu
