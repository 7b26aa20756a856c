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
// diagonal tiles stop each row at its own position: every product of a tile crossing the
// diagonal is cut there in groups of 4 rows (the scores and dP at the group's last visible
// key, P V and dS K at its last row's, dV = P^T dO and dK = dS^T Q, whose rows are keys, from
// the group's first query row), so the products are ~the visible half, not 3/4 of S^2 at
// S = 2 blocks. A key bias (a text classifier's padding
// mask, kPaddingScore = -30000 at padding), less its sequence's largest bias (the same
// softmax; a text of padding only then attends as if unmasked, without -30000 rounding its
// scores), is added to every score of its key; without causal, a key block whose every bias
// is then <= kFlashSkipBias is skipped: its terms e^(s + bias - m) are exactly 0 in f32 and
// f64 unless scores span ~1e4.
// Every block product is one register-blocked kernel (4 rows x up to 64 columns of sums in
// registers), in three forms chosen at run time (cpu_features(); MIXPREC_CPU_DISABLE hides a
// feature, and the tests run each form):
// - bf16 inputs on a CPU with AVX512-BF16 (Zen4/Zen5, Cooper Lake, Sapphire Rapids): vdpbf16ps,
//   16 lanes x 2 bf16 products per instruction into f32 sums, twice an f32 FMA's work. The
//   bf16 inputs are read in place (their rows are already the bf16 pairs the instruction
//   wants). P is rounded to bf16 before P V, and dS before dS K and dS^T Q (2^-9 relative
//   each: oneDNN's bf16 GEMMs on the unfused route under autocast round its probabilities and
//   score gradients the same way); the sums, the running max and sum, the log-sum-exp and
//   D = rowsum(dO * O) stay f32, and l sums the unrounded P.
// - f32, f16, and bf16 without AVX512-BF16, on AVX-512: f32 FMAs on the widened values.
// - f64, and any dtype without AVX-512: plain loops in C.
// The first two run the same tiles with the same summation order per element; only the
// products' rounding of P and dS differs.
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// A key block whose biases are all at or below this is skipped (see above).
inline constexpr double kFlashSkipBias = -1e4;

// An operand is [N, S, w] or [B, H, S, w] (N = B x H; head n = b H + h), any strides but a
// dense last dim: contiguous tensors, or views of a head's columns in a packed [B*S, 3E]
// qkv projection (strides {S 3E, D, 3E, 1}, offset E or 2E for K, V) and of a [B*S, E]
// context (strides {S E, D, E, 1}), which the kernel reads and writes in place: no
// permuting copies into and out of [N, S, D] (ops/attention.cpp's attention_from_packed_qkv).
// Measured on gpt-tiny's attention (B 16, S 128, E 128, 4 heads, causal, bf16 autocast, one
// thread, CPU time, 11 interleaved rounds on a loaded Zen4-class EPYC): forward + backward
// 9.51 -> 9.28 ms median (-2.4%; rounds spread ~+-3%); in `mixprec bench --model gpt-tiny`'s
// profile the copies and conversions around the kernel (permute, memmove, cat, 16-bit
// conversions) went from ~4.7% to ~3.4% of the samples. The bits do not depend on the layout.
struct FlashAttention {
  Tensor q, k, v;    // [N, S, D], [N, S, D], [N, S, Dv] (or [B, H, S, .] views): one floating dtype
  Tensor key_bias;   // undefined, or [B, S] contiguous floating, N % B == 0: added to every score
                     // of key j for the heads n with n / (N / B) == b
  Tensor out, lse;   // forward's: out [N, S, Dv] in q's dtype (or a view given before the
                     // forward, written in place); lse [N, S] in C
  bool causal = false;
  double scale = 1.0;  // score = scale * q.k (+ bias)
  int64_t block = 64;  // query and key block size, >= 1
};

// Fills t.out and t.lse.
void flash_attention_forward(FlashAttention& t);
// Where the backward writes: views (as FlashAttention's operands, in q's dtype) or, where
// undefined, new [N, S, .] tensors. dQ's rows are rounded to the dtype and then multiplied
// by dq_scale and rounded again (cpu::scale_elements): the chain rule of a Q that was a
// copy scaled in the dtype, with the bits of that copy's own backward.
struct FlashGradients {
  Tensor dq, dk, dv;
  double dq_scale = 1.0;
};
// {dq, dk, dv} in the inputs' dtype, for the gradient d_out (any floating dtype; [N, S, Dv],
// or a [B, H, S, Dv] view as above) of t.out.
std::vector<Tensor> flash_attention_backward(const FlashAttention& t, const Tensor& d_out,
                                             const FlashGradients& into = {});

}  // namespace mixprec::backend::cpu
