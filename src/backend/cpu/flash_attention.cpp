// backend/cpu/flash_attention.cpp: see flash_attention.h. A tile is one head's block of query
// rows against one block of keys; its operands are converted to C once per tile (so bf16 and
// f16 inputs cost one widening per block, and every product and sum runs in C), K and V^T are
// transposed so that a query row's scores are a row-vector times a [depth, cols] block (16 key
// columns per AVX-512 register, no horizontal sums). Each OpenMP thread owns its scratch
// (a few blocks: O(block x (block + D + Dv)) elements) and the output rows of its tasks.
// Long because the kernel is one idea: its row primitives in two ISAs, the forward tile and
// the two backward tiles share the tile geometry (Ctx) and must stay in step (the one-pass
// backward reproduces the two-pass one's bits).
#include "backend/cpu/flash_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/cpu/tail_mask.h"
#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/vector_exp.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {

namespace {

// ---- Row primitives. Plain: loops for any C (the f64 kernel, and f32 on CPUs without
// AVX-512). Avx512: the same contracts for float, 16 lanes per register.
template <typename C>
struct Plain {
  // out[j] = sum_d x[d] mt[d ld + j] for j < cols; with acc, out[j] += that sum.
  static void dot_cols(const C* x, const C* mt, int64_t ld, int64_t depth, int64_t cols, C* out, bool acc = false) {
    if (!acc) std::fill(out, out + cols, C(0));
    for (int64_t d = 0; d < depth; ++d) {
      const C a = x[d];
      const C* m = mt + d * ld;
      for (int64_t j = 0; j < cols; ++j) out[j] += a * m[j];
    }
  }
  // out[x] += sum_t w[t ws] m[t ld + x] for x < width.
  static void add_rows(C* out, const C* w, int64_t ws, const C* m, int64_t ld, int64_t count, int64_t width) {
    for (int64_t t = 0; t < count; ++t) {
      const C a = w[t * ws];
      const C* r = m + t * ld;
      for (int64_t x = 0; x < width; ++x) out[x] += a * r[x];
    }
  }
  // s[j] := scale s[j] + bias[j] (no bias: null); returns the max.
  static C scale_max(C* s, int64_t n, C scale, const C* bias) {
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      s[j] = s[j] * scale + (bias ? bias[j] : C(0));
      m = s[j] > m ? s[j] : m;
    }
    return m;
  }
  // s[j] := e^(s[j] - sub); returns their sum.
  static C exp_sum(C* s, int64_t n, C sub) {
    C sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - sub));
    return sum;
  }
  // dp[j] := p[j] (dp[j] - delta) scale.
  static void dscores(const C* p, C* dp, int64_t n, C delta, C scale) {
    for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - delta) * scale;
  }
  static void scale_row(C* x, int64_t n, C a) {
    for (int64_t j = 0; j < n; ++j) x[j] *= a;
  }
};

// GCC 12's _mm512_reduce_* and masked loads build on _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at each inlined use (a false positive, as in vector_exp.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The lanes of elements i .. i+15 inside a row of n (none when i >= n).
__attribute__((target("avx512f"))) inline __mmask16 live16(int64_t i, int64_t n) {
  return i < n ? lanes16(i, n) : __mmask16(0);
}

// NV registers (16 columns each) of dot_cols, the accumulators kept in registers over depth.
template <int NV>
__attribute__((target("avx512f"))) inline void dot_cols_nv(const float* x, const float* mt, int64_t ld, int64_t depth,
                                                           int64_t left, float* out, bool acc) {
  __mmask16 k[NV];
  __m512 a[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v)
    k[v] = live16(16 * v, left), a[v] = acc ? _mm512_maskz_loadu_ps(k[v], out + 16 * v) : _mm512_setzero_ps();
  for (int64_t d = 0; d < depth; ++d) {
    const __m512 b = _mm512_set1_ps(x[d]);
    const float* m = mt + d * ld;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) a[v] = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(k[v], m + 16 * v), a[v]);
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + 16 * v, k[v], a[v]);
}

template <int NV>
__attribute__((target("avx512f"))) inline void add_rows_nv(float* out, const float* w, int64_t ws, const float* m,
                                                           int64_t ld, int64_t count, int64_t left) {
  __mmask16 k[NV];
  __m512 a[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) k[v] = live16(16 * v, left), a[v] = _mm512_maskz_loadu_ps(k[v], out + 16 * v);
  for (int64_t t = 0; t < count; ++t) {
    const __m512 b = _mm512_set1_ps(w[t * ws]);
    const float* r = m + t * ld;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) a[v] = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(k[v], r + 16 * v), a[v]);
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + 16 * v, k[v], a[v]);
}

struct Avx512 {
  __attribute__((target("avx512f"))) static void dot_cols(const float* x, const float* mt, int64_t ld, int64_t depth,
                                                          int64_t cols, float* out, bool acc = false) {
    for (int64_t j0 = 0; j0 < cols; j0 += 64) {
      const int64_t left = cols - j0;
      if (left > 48) dot_cols_nv<4>(x, mt + j0, ld, depth, left, out + j0, acc);
      else if (left > 32) dot_cols_nv<3>(x, mt + j0, ld, depth, left, out + j0, acc);
      else if (left > 16) dot_cols_nv<2>(x, mt + j0, ld, depth, left, out + j0, acc);
      else dot_cols_nv<1>(x, mt + j0, ld, depth, left, out + j0, acc);
    }
  }
  __attribute__((target("avx512f"))) static void add_rows(float* out, const float* w, int64_t ws, const float* m,
                                                          int64_t ld, int64_t count, int64_t width) {
    for (int64_t x0 = 0; x0 < width; x0 += 64) {
      const int64_t left = width - x0;
      if (left > 48) add_rows_nv<4>(out + x0, w, ws, m + x0, ld, count, left);
      else if (left > 32) add_rows_nv<3>(out + x0, w, ws, m + x0, ld, count, left);
      else if (left > 16) add_rows_nv<2>(out + x0, w, ws, m + x0, ld, count, left);
      else add_rows_nv<1>(out + x0, w, ws, m + x0, ld, count, left);
    }
  }
  __attribute__((target("avx512f"))) static float scale_max(float* s, int64_t n, float scale, const float* bias) {
    __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      const __m512 b = bias ? _mm512_maskz_loadu_ps(k, bias + j) : _mm512_setzero_ps();
      const __m512 x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, s + j), vs, b);
      _mm512_mask_storeu_ps(s + j, k, x);
      m = _mm512_mask_max_ps(m, k, m, x);
    }
    return _mm512_reduce_max_ps(m);
  }
  __attribute__((target("avx512f"))) static float exp_sum(float* s, int64_t n, float sub) {
    __m512 acc = _mm512_setzero_ps();
    const __m512 vsub = _mm512_set1_ps(sub);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vsub));
      _mm512_mask_storeu_ps(s + j, k, e);
      acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    return _mm512_reduce_add_ps(acc);
  }
  __attribute__((target("avx512f"))) static void dscores(const float* p, float* dp, int64_t n, float delta,
                                                         float scale) {
    const __m512 vd = _mm512_set1_ps(delta), vs = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + j), vd);
      _mm512_mask_storeu_ps(dp + j, k, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + j), x), vs));
    }
  }
  __attribute__((target("avx512f"))) static void scale_row(float* x, int64_t n, float a) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), va));
    }
  }
};
#pragma GCC diagnostic pop

bool use_avx512() {
  static const bool yes = cpu_features().avx512f;
  return yes;
}

// What every tile reads: the operands as raw rows, the geometry, the key bias in C.
template <typename C>
struct Ctx {
  static constexpr DType cdt = std::is_same_v<C, double> ? DType::f64 : DType::f32;
  const char *q = nullptr, *k = nullptr, *v = nullptr;
  DType dt = DType::f32;
  int64_t N = 0, S = 0, D = 0, Dv = 0, heads = 1, bs = 1, nb = 0;
  bool causal = false;
  C scale = 1;
  std::vector<C> bias;        // [B, S], or empty
  std::vector<uint8_t> skip;  // [B, nb]: 1 for a key block the tiles skip, or empty

  // Rows [r0, r0 + rows) of head n of a [N, S, w] buffer of dtype `from`, converted to C.
  void load(const void* base, DType from, int64_t n, int64_t r0, int64_t rows, int64_t w, C* dst) const {
    convert_elements(static_cast<const char*>(base) + size_t((n * S + r0) * w) * dtype_size(from), from, dst, cdt,
                     rows * w);
  }
  void store(const C* src, void* base, DType to, int64_t n, int64_t r0, int64_t rows, int64_t w) const {
    convert_elements(src, cdt, static_cast<char*>(base) + size_t((n * S + r0) * w) * dtype_size(to), to, rows * w);
  }
  const C* bias_at(int64_t n, int64_t c0) const { return bias.empty() ? nullptr : bias.data() + (n / heads) * S + c0; }
  bool skipped(int64_t n, int64_t kb) const { return !skip.empty() && skip[size_t((n / heads) * nb + kb)]; }
  // Key blocks a query block [r0, r0 + rows) meets: with causal, none past its last row.
  int64_t key_blocks(int64_t r0, int64_t rows) const { return causal ? (r0 + rows - 1) / bs + 1 : nb; }
  // Keys of the block [c0, c0 + cols) that query row r sees (<= 0: none).
  int64_t visible(int64_t r, int64_t c0, int64_t cols) const { return causal ? std::min(cols, r - c0 + 1) : cols; }
};

template <typename C>
void transpose(const C* src, int64_t rows, int64_t w, C* dst, int64_t ld) {
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t x = 0; x < w; ++x) dst[x * ld + j] = src[j * w + x];
}

template <typename C>
Ctx<C> make_ctx(const FlashAttention& t) {
  Ctx<C> g;
  g.q = static_cast<const char*>(t.q.data());
  g.k = static_cast<const char*>(t.k.data());
  g.v = static_cast<const char*>(t.v.data());
  g.dt = t.q.dtype();
  g.N = t.q.size(0), g.S = t.q.size(1), g.D = t.q.size(2), g.Dv = t.v.size(2);
  g.bs = t.block;
  g.nb = (g.S + g.bs - 1) / g.bs;
  g.causal = t.causal;
  g.scale = C(t.scale);
  if (t.key_bias.defined()) {
    const int64_t B = t.key_bias.size(0);
    g.heads = g.N / B;
    g.bias.resize(size_t(B * g.S));
    convert_elements(t.key_bias.data(), t.key_bias.dtype(), g.bias.data(), Ctx<C>::cdt, B * g.S);
    // Each sequence's biases less their max: softmax does not change when every score of a
    // row moves by one constant, and a sequence of padding only (all kPaddingScore) then
    // has biases of 0, not -30000, whose addition would round its scores to f32's ulp at
    // 30000 (2^-9). Every sequence keeps a key of bias 0.
    for (int64_t b = 0; b < B; ++b) {
      C* row = g.bias.data() + b * g.S;
      const C top = *std::max_element(row, row + g.S);
      if (top != C(0) && std::isfinite(double(top)))
        for (int64_t j = 0; j < g.S; ++j) row[j] -= top;
    }
    // Skipping is for non-causal attention only: a causal row might see none of its
    // sequence's unmasked keys, and the unfused route gives it the masked ones.
    if (!g.causal) {
      g.skip.assign(size_t(B * g.nb), 0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t kb = 0; kb < g.nb; ++kb) {
          const C* blk = g.bias.data() + b * g.S + kb * g.bs;
          g.skip[size_t(b * g.nb + kb)] =
              std::all_of(blk, blk + std::min(g.bs, g.S - kb * g.bs), [](C x) { return x <= C(kFlashSkipBias); });
        }
    }
  }
  return g;
}

// Scratch a thread needs for any tile (elements of C).
template <typename C>
size_t scratch_size(const Ctx<C>& g) {
  return size_t(g.bs * (8 * g.D + 6 * g.Dv + 2 * g.bs + 4));
}

// ---- forward: one head's block of query rows against every key block it sees ----
template <typename C, typename I>
void forward_tile(const Ctx<C>& g, int64_t n, int64_t qb, C* buf, void* out, C* lse) {
  const int64_t bs = g.bs, D = g.D, Dv = g.Dv, S = g.S, r0 = qb * bs, rows = std::min(bs, S - r0);
  C *Q = buf, *Kr = Q + bs * D, *Kt = Kr + bs * D, *V = Kt + bs * D, *P = V + bs * Dv, *O = P + bs * bs,
    *m = O + bs * Dv, *l = m + bs;
  g.load(g.q, g.dt, n, r0, rows, D, Q);
  std::fill(O, O + rows * Dv, C(0));
  std::fill(m, m + rows, -std::numeric_limits<C>::infinity());
  std::fill(l, l + rows, C(0));
  for (int64_t kb = 0, kend = g.key_blocks(r0, rows); kb < kend; ++kb) {
    if (g.skipped(n, kb)) continue;
    const int64_t c0 = kb * bs, cols = std::min(bs, S - c0);
    g.load(g.k, g.dt, n, c0, cols, D, Kr);
    transpose(Kr, cols, D, Kt, bs);
    g.load(g.v, g.dt, n, c0, cols, Dv, V);
    const C* bias = g.bias_at(n, c0);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t lim = g.visible(r0 + i, c0, cols);
      if (lim <= 0) continue;
      C* p = P + i * bs;
      I::dot_cols(Q + i * D, Kt, bs, D, lim, p);
      const C m_new = std::max(m[i], I::scale_max(p, lim, g.scale, bias));
      // The running sum and output rescaled to the new max (nothing to rescale at first).
      const C alpha = m[i] == -std::numeric_limits<C>::infinity() ? C(0) : std::exp(m[i] - m_new);
      const C sum = I::exp_sum(p, lim, m_new);
      l[i] = l[i] * alpha + sum;
      C* o = O + i * Dv;
      I::scale_row(o, Dv, alpha);
      I::add_rows(o, p, 1, V, Dv, lim, Dv);
      m[i] = m_new;
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    I::scale_row(O + i * Dv, Dv, C(1) / l[i]);
    lse[n * S + r0 + i] = m[i] + std::log(l[i]);
  }
  g.store(O, out, g.dt, n, r0, rows, Dv);
}

// ---- backward. One row of a tile: P = e^(scale q.k + bias - lse) and dS = P (dP - D) scale,
// dP = dO . v; entries past the row's visible keys set to 0 (they feed column sums).
template <typename C, typename I>
void probs_and_dscores(const Ctx<C>& g, const C* q, const C* dout, const C* Kt, const C* Vt, const C* bias, int64_t lim,
                       int64_t cols, C lse, C delta, C* p, C* ds) {
  if (lim > 0) {
    I::dot_cols(q, Kt, g.bs, g.D, lim, p);
    I::scale_max(p, lim, g.scale, bias);
    I::exp_sum(p, lim, lse);
    I::dot_cols(dout, Vt, g.bs, g.Dv, lim, ds);
    I::dscores(p, ds, lim, delta, g.scale);
  }
  const int64_t from = std::max<int64_t>(lim, 0);
  std::fill(p + from, p + cols, C(0));
  std::fill(ds + from, ds + cols, C(0));
}

struct Grads {
  const void* dout;
  DType gdt;
  void *dq, *dk, *dv;
};

// dK and dV of one head's key block, summed over the query blocks that see it. With dq (the
// head's [S, D] dQ in C, when one thread does the whole head), also each query row's dS K
// term for this key block: the same values in the same order (key blocks ascending) as
// backward_q_tile adds them, so either way gives the same bits.
template <typename C, typename I>
void backward_kv_tile(const Ctx<C>& g, const C* lse, const C* delta, const Grads& gr, int64_t n, int64_t kb, C* buf,
                      C* dq = nullptr) {
  const int64_t bs = g.bs, D = g.D, Dv = g.Dv, S = g.S, c0 = kb * bs, cols = std::min(bs, S - c0);
  // dK and dV are accumulated transposed, [D, cols] and [Dv, cols]: a row of dK^T is a row of
  // Q^T times the dS block, 16 keys per register, as the scores are (Q^T and dO^T per query
  // block).
  C *Kt = buf, *Vt = Kt + bs * D, *tmp = Vt + bs * Dv, *Q = tmp + bs * std::max(D, Dv), *dO = Q + bs * D,
    *P = dO + bs * Dv, *dS = P + bs * bs, *dKt = dS + bs * bs, *dVt = dKt + bs * D, *Kr = dVt + bs * Dv,
    *Qt = Kr + bs * D, *dOt = Qt + bs * D;
  std::fill(dKt, dKt + D * bs, C(0));
  std::fill(dVt, dVt + Dv * bs, C(0));
  if (!g.skipped(n, kb)) {
    g.load(g.k, g.dt, n, c0, cols, D, Kr);
    transpose(Kr, cols, D, Kt, bs);
    g.load(g.v, g.dt, n, c0, cols, Dv, tmp);
    transpose(tmp, cols, Dv, Vt, bs);
    const C* bias = g.bias_at(n, c0);
    for (int64_t qb = g.causal ? c0 / bs : 0; qb < g.nb; ++qb) {
      const int64_t r0 = qb * bs, rows = std::min(bs, S - r0);
      g.load(g.q, g.dt, n, r0, rows, D, Q);
      g.load(gr.dout, gr.gdt, n, r0, rows, Dv, dO);
      transpose(Q, rows, D, Qt, bs);
      transpose(dO, rows, Dv, dOt, bs);
      for (int64_t i = 0; i < rows; ++i)
        probs_and_dscores<C, I>(g, Q + i * D, dO + i * Dv, Kt, Vt, bias, g.visible(r0 + i, c0, cols), cols,
                                lse[n * S + r0 + i], delta[n * S + r0 + i], P + i * bs, dS + i * bs);
      for (int64_t x = 0; x < Dv; ++x) I::dot_cols(dOt + x * bs, P, bs, rows, cols, dVt + x * bs, true);  // dV += P^T dO
      for (int64_t x = 0; x < D; ++x) I::dot_cols(Qt + x * bs, dS, bs, rows, cols, dKt + x * bs, true);  // dK += dS^T Q
      if (dq)
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t lim = g.visible(r0 + i, c0, cols);
          if (lim > 0) I::add_rows(dq + (r0 + i) * D, dS + i * bs, 1, Kr, D, lim, D);  // dQ_i += sum_j dS_ij K_j
        }
    }
  }
  transpose(dKt, D, bs, Q, D);  // back to [cols, D] rows (only the first cols are stored)
  g.store(Q, gr.dk, g.dt, n, c0, cols, D);
  transpose(dVt, Dv, bs, dO, Dv);
  g.store(dO, gr.dv, g.dt, n, c0, cols, Dv);
}

// dQ of one head's query block, summed over the key blocks it sees.
template <typename C, typename I>
void backward_q_tile(const Ctx<C>& g, const C* lse, const C* delta, const Grads& gr, int64_t n, int64_t qb, C* buf) {
  const int64_t bs = g.bs, D = g.D, Dv = g.Dv, S = g.S, r0 = qb * bs, rows = std::min(bs, S - r0);
  C *Kr = buf, *Kt = Kr + bs * D, *Vt = Kt + bs * D, *tmp = Vt + bs * Dv, *Q = tmp + bs * Dv, *dO = Q + bs * D,
    *P = dO + bs * Dv, *dS = P + bs, *dQ = dS + bs;
  g.load(g.q, g.dt, n, r0, rows, D, Q);
  g.load(gr.dout, gr.gdt, n, r0, rows, Dv, dO);
  std::fill(dQ, dQ + rows * D, C(0));
  for (int64_t kb = 0, kend = g.key_blocks(r0, rows); kb < kend; ++kb) {
    if (g.skipped(n, kb)) continue;
    const int64_t c0 = kb * bs, cols = std::min(bs, S - c0);
    g.load(g.k, g.dt, n, c0, cols, D, Kr);
    transpose(Kr, cols, D, Kt, bs);
    g.load(g.v, g.dt, n, c0, cols, Dv, tmp);
    transpose(tmp, cols, Dv, Vt, bs);
    const C* bias = g.bias_at(n, c0);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t lim = g.visible(r0 + i, c0, cols);
      if (lim <= 0) continue;
      probs_and_dscores<C, I>(g, Q + i * D, dO + i * Dv, Kt, Vt, bias, lim, cols, lse[n * S + r0 + i],
                              delta[n * S + r0 + i], P, dS);
      I::add_rows(dQ + i * D, dS, 1, Kr, D, lim, D);  // dQ_i += sum_j dS_ij K_j
    }
  }
  g.store(dQ, gr.dq, g.dt, n, r0, rows, D);
}

// Runs body(n, block, scratch) for every (head, block) on the OpenMP threads, the blocks
// from last to first (with causal, the last query blocks have the most work: dynamic
// scheduling then balances the rest). The results do not depend on the order.
template <typename C, typename Body>
void for_each_tile(const Ctx<C>& g, Body body) {
  const int64_t tasks = g.N * g.nb;
#pragma omp parallel if (tasks > 1)
  {
    std::vector<C> buf(scratch_size(g));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) body(task % g.N, g.nb - 1 - task / g.N, buf.data());
  }
}

template <typename C, typename I>
void forward(FlashAttention& t) {
  const Ctx<C> g = make_ctx<C>(t);
  t.out = Tensor::empty({g.N, g.S, g.Dv}, g.dt);
  t.lse = Tensor::empty({g.N, g.S}, Ctx<C>::cdt);
  void* out = t.out.data();
  C* lse = t.lse.data_ptr<C>();
  for_each_tile(g, [&](int64_t n, int64_t qb, C* buf) { forward_tile<C, I>(g, n, qb, buf, out, lse); });
}

template <typename C, typename I>
std::vector<Tensor> backward(const FlashAttention& t, const Tensor& d_out) {
  const Ctx<C> g = make_ctx<C>(t);
  const Tensor dout = d_out.is_contiguous() ? d_out : d_out.contiguous();
  // delta = rowsum(dO * O): the row's sum of P * dP, without the scores.
  Tensor delta_t = Tensor::empty({g.N, g.S}, Ctx<C>::cdt);
  C* delta = delta_t.data_ptr<C>();
  for_each_tile(g, [&](int64_t n, int64_t qb, C* buf) {
    const int64_t r0 = qb * g.bs, rows = std::min(g.bs, g.S - r0);
    C *a = buf, *b = buf + g.bs * g.Dv;
    g.load(dout.data(), dout.dtype(), n, r0, rows, g.Dv, a);
    g.load(t.out.data(), t.out.dtype(), n, r0, rows, g.Dv, b);
    for (int64_t i = 0; i < rows; ++i) {
      C acc = 0;
      for (int64_t x = 0; x < g.Dv; ++x) acc += a[i * g.Dv + x] * b[i * g.Dv + x];
      delta[n * g.S + r0 + i] = acc;
    }
  });
  Tensor dq = Tensor::empty({g.N, g.S, g.D}, g.dt), dk = Tensor::empty({g.N, g.S, g.D}, g.dt),
         dv = Tensor::empty({g.N, g.S, g.Dv}, g.dt);
  const Grads gr{dout.data(), dout.dtype(), dq.data(), dk.data(), dv.data()};
  const C* lse = t.lse.data_ptr<C>();
  if (g.N >= 2 * int64_t(omp_get_max_threads())) {
    // Heads enough for every thread: one pass, a thread per head, dQ with dK and dV (5 block
    // products instead of 7; the same bits as the two passes).
#pragma omp parallel
    {
      std::vector<C> buf(scratch_size(g)), dq(size_t(g.S * g.D));
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < g.N; ++n) {
        std::fill(dq.begin(), dq.end(), C(0));
        for (int64_t kb = 0; kb < g.nb; ++kb) backward_kv_tile<C, I>(g, lse, delta, gr, n, kb, buf.data(), dq.data());
        g.store(dq.data(), gr.dq, g.dt, n, 0, g.S, g.D);
      }
    }
    return {dq, dk, dv};
  }
  for_each_tile(g, [&](int64_t n, int64_t kb, C* buf) { backward_kv_tile<C, I>(g, lse, delta, gr, n, kb, buf); });
  for_each_tile(g, [&](int64_t n, int64_t qb, C* buf) { backward_q_tile<C, I>(g, lse, delta, gr, n, qb, buf); });
  return {dq, dk, dv};
}

}  // namespace

void flash_attention_forward(FlashAttention& t) {
  if (t.q.dtype() == DType::f64) return forward<double, Plain<double>>(t);
  if (use_avx512()) return forward<float, Avx512>(t);
  forward<float, Plain<float>>(t);
}

std::vector<Tensor> flash_attention_backward(const FlashAttention& t, const Tensor& d_out) {
  if (t.q.dtype() == DType::f64) return backward<double, Plain<double>>(t, d_out);
  if (use_avx512()) return backward<float, Avx512>(t, d_out);
  return backward<float, Plain<float>>(t, d_out);
}

}  // namespace mixprec::backend::cpu
