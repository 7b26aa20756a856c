// backend/cpu/flash_attention.cpp: see flash_attention.h. A tile is one head's block of query
// rows against one block of keys. Its products are gemm calls (out (+)= A m: A a row-major or
// transposed view of a block, m a block in the form its I packs it) on the three forms Plain,
// Avx512 and Bf16Dot; the f32 forms read operands converted to C once per block (bf16 and f16
// widened), Bf16Dot reads bf16 inputs in place. Each OpenMP thread owns its scratch (a few
// blocks: O(block x (block + D + Dv)) elements, kept across calls) and the output rows of its
// tasks.
// Long because the kernel is one idea: its products and row primitives in three forms, the
// forward tile and the two backward tiles share the tile geometry (Ctx) and must stay in step
// (the one-pass backward reproduces the two-pass one's bits).
#include "backend/cpu/flash_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "backend/cpu/flash_rows_avx2.h"
#include "backend/cpu/layout.h"
#include "backend/cpu/tail_mask.h"
#include "backend/cpu/transpose16.h"
#include "core/convert.h"
#include "core/convert_simd.h"
#include "core/cpu_features.h"
#include "core/vector_exp.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {

namespace {

// ---- Row primitives. Plain: loops for any C (the f64 kernel, and f32 on CPUs without
// AVX-512). Avx512: the same contracts for float, 16 lanes per register.
template <typename C>
struct Plain {
  // The form gemm reads its [depth, ld] operand m in (its first cols columns): the matrix
  // itself here and in Avx512; Bf16Dot's pairs of rows.
  static const C* pack(const C* m, int64_t, int64_t, int64_t, C*) { return m; }
  // gemm's other operand: element (i, d) at p[i rs + d ds]. a_rows: the rows of a [rows, ld]
  // matrix m (their first depth elements); a_cols: its columns (depth of its rows, n of its
  // columns), without a copy here; Bf16Dot's are bf16 pairs in w.
  struct A {
    const C* p;
    int64_t rs, ds;
    A from(int64_t i) const { return {p + i * rs, rs, ds}; }
    // From depth d0 on (and m_from for the operand it meets); d0 even (Bf16Dot's pairs).
    A from_depth(int64_t d0) const { return {p + d0 * ds, rs, ds}; }
  };
  static A a_rows(const C* m, int64_t ld, int64_t, int64_t, C*) { return {m, ld, 1}; }
  static const C* m_from(const C* m, int64_t ld, int64_t d0) { return m + d0 * ld; }
  static A a_cols(const C* m, int64_t ld, int64_t, int64_t, C*) { return {m, 1, ld}; }
  // out[i ldo + j] (+ with acc)= sum_{d < depth} a(i, d) m[d ld + j], for i < rows and
  // j < cols, each sum in the order of d; m in pack's form.
  static void gemm(const A& a, int64_t rows, const C* m, int64_t ld, int64_t depth, int64_t cols, C* out, int64_t ldo,
                   bool acc) {
    for (int64_t i = 0; i < rows; ++i) {
      C* o = out + i * ldo;
      if (!acc) std::fill(o, o + cols, C(0));
      for (int64_t d = 0; d < depth; ++d) {
        const C x = a.p[i * a.rs + d * a.ds];
        const C* r = m + d * ld;
        for (int64_t j = 0; j < cols; ++j) o[j] += x * r[j];
      }
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
  // The backward's row in one pass: p[j] := e^(scale s[j] + bias[j] - lse) (the forward's
  // probability, as scale_max and exp_sum make it), dp[j] := p[j] (dp[j] - delta) scale.
  static void probs_dscores(C* p, C* dp, int64_t n, C scale, const C* bias, C lse, C delta) {
    for (int64_t j = 0; j < n; ++j) {
      const C x = p[j] * scale + (bias ? bias[j] : C(0));
      p[j] = std::exp(x - lse);
      dp[j] = p[j] * (dp[j] - delta) * scale;
    }
  }
  static void scale_row(C* x, int64_t n, C a) {
    for (int64_t j = 0; j < n; ++j) x[j] *= a;
  }
  // P V's first operand from softmax_block's P.
  static A a_probs(const C* s, int64_t ld, int64_t cols, int64_t rows, C* w) { return a_rows(s, ld, cols, rows, w); }
  // sum_j a[j] b[j] (the backward's delta = rowsum(dO * O)).
  static C dot(const C* a, const C* b, int64_t n) {
    C acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += a[j] * b[j];
    return acc;
  }
  // dst[x ld + j] = src[j w + x] for j < rows, x < w.
  static void transpose(const C* src, int64_t rows, int64_t w, C* dst, int64_t ld) {
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t x = 0; x < w; ++x) dst[x * ld + j] = src[j * w + x];
  }
  // One key block's online-softmax step for rows i < rows of s (ld apart, cols wide), each
  // over its first lim[i] entries: s := scale s + bias; m_new = max(m, the row's max); s := e^(s - m_new);
  // l := l alpha + the row's sum, alpha = e^(m - m_new) (0 before the first visible key; 1 for
  // a row with lim 0, which keeps its m and l), returned in alpha for the output's rescale.
  // `work` holds 16 x rows elements; `words` is Bf16Dot's (P rounded to bf16 pairs there).
  static void softmax_block(C* s, int64_t ld, int64_t rows, const int64_t* lim, int64_t, C scale, const C* bias,
                            C* m, C* l, C* alpha, C*, C*) {
    for (int64_t i = 0; i < rows; ++i) {
      alpha[i] = C(1);
      if (lim[i] == 0) continue;
      const C m_new = std::max(m[i], scale_max(s + i * ld, lim[i], scale, bias));
      alpha[i] = m[i] == -std::numeric_limits<C>::infinity() ? C(0) : std::exp(m[i] - m_new);
      l[i] = l[i] * alpha[i] + exp_sum(s + i * ld, lim[i], m_new);
      m[i] = m_new;
    }
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

// Calls K<R, NV>::run for a block of R rows (1..kRows) and NV registers of 16 columns
// (1..4, the 64 columns from `left` on): the micro-kernels of gemm, which keep R x NV sums in
// registers over the whole depth (each loaded operand row serves R rows, and R x NV
// independent chains hide the multiply-add's latency).
inline constexpr int64_t kRows = 4;
template <template <int, int> class K, int R, typename... A>
inline void by_width(int64_t left, A... a) {
  if (left > 48) K<R, 4>::run(left, a...);
  else if (left > 32) K<R, 3>::run(left, a...);
  else if (left > 16) K<R, 2>::run(left, a...);
  else K<R, 1>::run(left, a...);
}
template <template <int, int> class K, typename... A>
inline void by_block(int64_t rows, int64_t left, A... a) {
  switch (rows) {
    case 4: return by_width<K, 4>(left, a...);
    case 3: return by_width<K, 3>(left, a...);
    case 2: return by_width<K, 2>(left, a...);
    default: return by_width<K, 1>(left, a...);
  }
}

template <int R, int NV>
struct GemmF32 {
  __attribute__((target("avx512f"))) static void run(int64_t left, const float* a, int64_t rs, int64_t ds,
                                                     const float* m, int64_t ld, int64_t depth, float* out, int64_t ldo,
                                                     bool acc) {
    __mmask16 k[NV];
    __m512 c[R][NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) k[v] = live16(16 * v, left);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        c[r][v] = acc ? _mm512_maskz_loadu_ps(k[v], out + r * ldo + 16 * v) : _mm512_setzero_ps();
    for (int64_t d = 0; d < depth; ++d) {
      __m512 b[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) b[v] = _mm512_maskz_loadu_ps(k[v], m + d * ld + 16 * v);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(a[r * rs + d * ds]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) c[r][v] = _mm512_fmadd_ps(x, b[v], c[r][v]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + r * ldo + 16 * v, k[v], c[r][v]);
  }
};

// A pair of bf16 as one 32-bit word. The words live in bf16 tensors and float scratch, so
// they are read and written as may_alias (no type-based alias assumptions about them).
typedef uint32_t __attribute__((__may_alias__)) Word;

// dst[p ld + j] = src[j sld + p] for j < rows, p < W, on 32-bit words: bf16 inputs read in
// place (word p of row j a pair along the row: K^T or V^T packed; rows sld words apart, as
// K and V columns of a packed qkv are), or floats. In 16 x 16
// blocks of words through registers (the element-wise loop's strided stores were ~7% of a
// step's attention time, perf): 16 rows loaded (zeros past the ends), transposed
// (transpose16.h), each column stored as a row of dst.
__attribute__((target("avx512f"))) void transpose_words(const Word* src, int64_t rows, int64_t W, int64_t sld,
                                                        Word* dst, int64_t ld) {
  for (int64_t j0 = 0; j0 < rows; j0 += 16)
    for (int64_t p0 = 0; p0 < W; p0 += 16) {
      const __mmask16 kp = lanes16(p0, W), kj = lanes16(j0, rows);
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        r[i] = j0 + i < rows ? _mm512_maskz_loadu_epi32(kp, src + (j0 + i) * sld + p0) : _mm512_setzero_si512();
      transpose16x16(r);
      for (int64_t c = 0; c < 16 && p0 + c < W; ++c) _mm512_mask_storeu_epi32(dst + (p0 + c) * ld + j0, kj, r[c]);
    }
}
struct Avx512 {
  static const float* pack(const float* m, int64_t, int64_t, int64_t, float*) { return m; }
  using A = Plain<float>::A;
  static A a_rows(const float* m, int64_t ld, int64_t, int64_t, float*) { return {m, ld, 1}; }
  static const float* m_from(const float* m, int64_t ld, int64_t d0) { return m + d0 * ld; }
  static A a_cols(const float* m, int64_t ld, int64_t, int64_t, float*) { return {m, 1, ld}; }
  static void gemm(const A& a, int64_t rows, const float* m, int64_t ld, int64_t depth, int64_t cols, float* out,
                   int64_t ldo, bool acc) {
    for (int64_t i = 0; i < rows; i += kRows)
      for (int64_t j0 = 0; j0 < cols; j0 += 64)
        by_block<GemmF32>(std::min(kRows, rows - i), cols - j0, a.p + i * a.rs, a.rs, a.ds, m + j0, ld, depth,
                          out + i * ldo + j0, ldo, acc);
  }
  __attribute__((target("avx512f"))) static void probs_dscores(float* p, float* dp, int64_t n, float scale,
                                                               const float* bias, float lse, float delta) {
    const __m512 vd = _mm512_set1_ps(delta), vs = _mm512_set1_ps(scale), vl = _mm512_set1_ps(lse);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      const __m512 b = bias ? _mm512_maskz_loadu_ps(k, bias + j) : _mm512_setzero_ps();
      const __m512 e = exp_nonpositive_avx512(_mm512_sub_ps(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + j), vs, b), vl));
      _mm512_mask_storeu_ps(p + j, k, e);
      const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + j), vd);
      _mm512_mask_storeu_ps(dp + j, k, _mm512_mul_ps(_mm512_mul_ps(e, x), vs));
    }
  }
  // Plain's softmax_block, the same values: each row's max and sum kept as a vector in work
  // and reduced after the loop over rows, so that the rows' exps overlap (one row of a causal
  // block is 1-4 vectors: called a row at a time, its exp chain's latency and the reductions
  // dominated, perf); the scaled scores are computed again in the exp loop, not stored.
  static void softmax_block(float* s, int64_t ld, int64_t rows, const int64_t* lim, int64_t, float scale,
                            const float* bias, float* m, float* l, float* alpha, float* work, float*) {
    softmax_max(s, ld, rows, lim, scale, bias, m, alpha, work);
    softmax_exp(s, ld, rows, lim, scale, bias, m, work);
    softmax_sum(rows, lim, l, alpha, work);
  }
  // P V's first operand from softmax_block's P: P itself.
  static A a_probs(const float* s, int64_t ld, int64_t cols, int64_t rows, float* w) {
    return a_rows(s, ld, cols, rows, w);
  }
  // softmax_block's steps: m := max(m, the rows' maxima of scale s + bias), alpha.
  __attribute__((target("avx512f"))) static void softmax_max(const float* s, int64_t ld, int64_t rows,
                                                             const int64_t* lim, float scale, const float* bias,
                                                             float* m, float* alpha, float* work) {
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = s + i * ld;
      __m512 mx = ninf;
      for (int64_t j = 0; j < lim[i]; j += 16) {
        const __mmask16 k = lanes16(j, lim[i]);
        const __m512 b = bias ? _mm512_maskz_loadu_ps(k, bias + j) : _mm512_setzero_ps();
        mx = _mm512_mask_max_ps(mx, k, mx, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, r + j), vs, b));
      }
      _mm512_storeu_ps(work + 16 * i, mx);
    }
    for (int64_t i = 0; i < rows; ++i) {
      alpha[i] = 1.0f;
      if (lim[i] == 0) continue;
      const float m_new = std::max(m[i], _mm512_reduce_max_ps(_mm512_loadu_ps(work + 16 * i)));
      alpha[i] = m[i] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m[i] - m_new);
      m[i] = m_new;
    }
  }
  // The probability e^(scale s + bias - m) of the 16 entries from j of a row (0 past lim).
  __attribute__((target("avx512f"))) static __m512 prob16(const float* r, int64_t j, int64_t lim, __m512 vs,
                                                          const float* bias, __m512 vsub) {
    const __mmask16 k = live16(j, lim);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(k, bias + j) : _mm512_setzero_ps();
    const __m512 x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, r + j), vs, b);
    return _mm512_maskz_mov_ps(k, exp_nonpositive_avx512(_mm512_sub_ps(x, vsub)));
  }
  // s := the probabilities (their first lim entries), each row's sum vector in work.
  __attribute__((target("avx512f"))) static void softmax_exp(float* s, int64_t ld, int64_t rows, const int64_t* lim,
                                                             float scale, const float* bias, const float* m,
                                                             float* work) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < rows; ++i) {
      float* r = s + i * ld;
      const __m512 vsub = _mm512_set1_ps(m[i]);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t j = 0; j < lim[i]; j += 16) {
        const __m512 e = prob16(r, j, lim[i], vs, bias, vsub);
        _mm512_mask_storeu_ps(r + j, lanes16(j, lim[i]), e);
        acc = _mm512_add_ps(acc, e);
      }
      _mm512_storeu_ps(work + 16 * i, acc);
    }
  }
  // l := l alpha + the rows' sums.
  __attribute__((target("avx512f"))) static void softmax_sum(int64_t rows, const int64_t* lim, float* l,
                                                             const float* alpha, const float* work) {
    for (int64_t i = 0; i < rows; ++i)
      if (lim[i] > 0) l[i] = l[i] * alpha[i] + _mm512_reduce_add_ps(_mm512_loadu_ps(work + 16 * i));
  }
  // 16 lanes of partial sums, reduced at the end (the scalar loop was ~5% of the backward).
  __attribute__((target("avx512f"))) static float dot(const float* a, const float* b, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + j), _mm512_maskz_loadu_ps(k, b + j), acc);
    }
    return _mm512_reduce_add_ps(acc);
  }
  // Floats are 32-bit words: transpose_words' registers instead of strided scalar stores.
  static void transpose(const float* src, int64_t rows, int64_t w, float* dst, int64_t ld) {
    transpose_words(reinterpret_cast<const Word*>(src), rows, w, w, reinterpret_cast<Word*>(dst), ld);
  }
  __attribute__((target("avx512f"))) static void scale_row(float* x, int64_t n, float a) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = lanes16(j, n);
      _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), va));
    }
  }
};

// ---- Avx2: Plain<float>'s contracts on 8-lane registers (flash_rows_avx2.h), for CPUs with
// AVX2 and FMA but no AVX-512. The operand forms (dense rows and views, no packing) and the
// transpose are Plain<float>'s own.
struct Avx2 : Plain<float> {
  static void gemm(const A& a, int64_t rows, const float* m, int64_t ld, int64_t depth, int64_t cols, float* out,
                   int64_t ldo, bool acc) {
    flash_avx2::gemm(a.p, a.rs, a.ds, rows, m, ld, depth, cols, out, ldo, acc);
  }
  static void probs_dscores(float* p, float* dp, int64_t n, float scale, const float* bias, float lse, float delta) {
    flash_avx2::probs_dscores(p, dp, n, scale, bias, lse, delta);
  }
  static void softmax_block(float* s, int64_t ld, int64_t rows, const int64_t* lim, int64_t, float scale,
                            const float* bias, float* m, float* l, float* alpha, float*, float*) {
    flash_avx2::softmax_block(s, ld, rows, lim, scale, bias, m, l, alpha);
  }
  static float dot(const float* a, const float* b, int64_t n) { return flash_avx2::dot(a, b, n); }
  static void scale_row(float* x, int64_t n, float a) { flash_avx2::scale_row(x, n, a); }
};

// ---- Bf16Dot: Avx512 with every product on AVX512-BF16's vdpbf16ps, for bf16 inputs. One
// instruction multiplies 16 pairs of bf16 and adds both products to 16 f32 sums: twice the
// multiply-adds of an f32 FMA, as in oneDNN's bf16 GEMMs. So the reduced dimension goes in
// pairs: a [depth, ld] operand is packed as [ceil(depth / 2), ld] 32-bit words, word (p, j)
// holding rows 2p and 2p + 1 of column j (the second 0 past an odd depth), and the row
// vector x is rounded to bf16 pairs as it is read. The operands that come from bf16 inputs
// (Q, K, V, dO) round back exactly; P and dS are rounded to bf16 here (2^-9 relative, as the
// unfused route's bf16 probabilities and score gradients are), while every sum, the running
// max and sum of the online softmax and the log-sum-exp stay f32.


// GemmF32's twin: a(i, p) is a pair of bf16 in a word, at a[i rs + p ps]; m is packed; a
// depth-step is a pair of m's rows.
template <int R, int NV>
struct GemmBf16 {
  __attribute__((target("avx512f,avx512bf16"))) static void run(int64_t left, const Word* a, int64_t rs,
                                                                int64_t ps, const Word* m, int64_t ld,
                                                                int64_t depth, float* out, int64_t ldo, bool acc) {
    __mmask16 k[NV];
    __m512 c[R][NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) k[v] = live16(16 * v, left);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        c[r][v] = acc ? _mm512_maskz_loadu_ps(k[v], out + r * ldo + 16 * v) : _mm512_setzero_ps();
    const int64_t pairs = depth / 2;
    for (int64_t p = 0; p <= pairs; ++p) {
      if (p == pairs && !(depth & 1)) break;
      // The last word of an odd depth: a's pad is 0, and m's second half (the next row: a
      // later key, or pack's 0) is cleared too, so that an inf or NaN there cannot add 0 * inf.
      const __m512i keep = _mm512_set1_epi32(p < pairs ? -1 : 0xffff);
      __m512bh b[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        b[v] = (__m512bh)_mm512_and_si512(_mm512_maskz_loadu_epi32(k[v], m + p * ld + 16 * v), keep);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(int(a[r * rs + p * ps]));
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) c[r][v] = _mm512_dpbf16_ps(c[r][v], b[v], x);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + r * ldo + 16 * v, k[v], c[r][v]);
  }
};

struct Bf16Dot : Avx512 {
  // m [depth, ld] (its first cols columns) as pairs of rows in 32-bit words, into dst
  // (packed_floats(depth, ld) floats).
  __attribute__((target("avx512f,avx512bf16"))) static const float* pack(const float* m, int64_t depth, int64_t ld,
                                                                        int64_t cols, float* dst) {
    Word* o = reinterpret_cast<Word*>(dst);
    for (int64_t p = 0; p < (depth + 1) / 2; ++p) {
      const float* r0 = m + 2 * p * ld;
      const bool second = 2 * p + 1 < depth;
      for (int64_t j = 0; j < cols; j += 16) {
        const __mmask16 k = lanes16(j, cols);
        const __m512 a = _mm512_maskz_loadu_ps(k, r0 + j);
        const __m512 b = second ? _mm512_maskz_loadu_ps(k, r0 + ld + j) : _mm512_setzero_ps();
        const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
        const __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b));
        _mm512_mask_storeu_epi32(o + p * ld + j, k, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
      }
    }
    return dst;
  }
  struct A {
    const Word* p;
    int64_t rs, ps;
    A from(int64_t i) const { return {p + i * rs, rs, ps}; }
    A from_depth(int64_t d0) const { return {p + d0 / 2 * ps, rs, ps}; }
  };
  // The rows of m rounded to bf16 pairs in w ((depth + 1) / 2 words a row, 0 past depth).
  __attribute__((target("avx512f,avx512bf16"))) static A a_rows(const float* m, int64_t ld, int64_t depth,
                                                               int64_t rows, float* w) {
    const int64_t words = (depth + 1) / 2;
    Word* o = reinterpret_cast<Word*>(w);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t d = 0; d < depth; d += 32) {
        const __m512 lo = _mm512_maskz_loadu_ps(live16(d, depth), m + i * ld + d);
        const __m512 hi = _mm512_maskz_loadu_ps(live16(d + 16, depth), m + i * ld + d + 16);
        _mm512_mask_storeu_epi32(o + i * words + d / 2, live16(d / 2, words), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
      }
    return {o, words, 1};
  }
  // src [rows, w] bf16 (rows sld apart) packed (pairs of rows) into dst [(rows + 1) / 2, w] words.
  __attribute__((target("avx512f,avx512bw,avx512vl"))) static void interleave(const uint16_t* src, int64_t rows,
                                                                             int64_t w, int64_t sld, Word* dst) {
    for (int64_t p = 0; p < (rows + 1) / 2; ++p) {
      const uint16_t* a = src + 2 * p * sld;
      const bool second = 2 * p + 1 < rows;
      for (int64_t x = 0; x < w; x += 16) {
        const __mmask16 k = lanes16(x, w);
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, a + x));
        const __m512i hi = second ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, a + sld + x)) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(dst + p * w + x, k, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
      }
    }
  }
  // Avx512's softmax_block with the probabilities rounded to bf16 pairs into words as they
  // are made ((cols + 1) / 2 words a row, 0 past each row's lim), P V's operand (a_probs):
  // no f32 P stored and no pass of a_rows over it. The same f32 values and sums.
  static void softmax_block(float* s, int64_t ld, int64_t rows, const int64_t* lim, int64_t cols, float scale,
                            const float* bias, float* m, float* l, float* alpha, float* work, float* words) {
    softmax_max(s, ld, rows, lim, scale, bias, m, alpha, work);
    softmax_words(s, ld, rows, lim, cols, scale, bias, m, work, reinterpret_cast<Word*>(words));
    softmax_sum(rows, lim, l, alpha, work);
  }
  __attribute__((target("avx512f,avx512bf16"))) static void softmax_words(const float* s, int64_t ld, int64_t rows,
                                                                         const int64_t* lim, int64_t cols,
                                                                         float scale, const float* bias,
                                                                         const float* m, float* work, Word* words) {
    const __m512 vs = _mm512_set1_ps(scale);
    const int64_t wpr = (cols + 1) / 2;
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = s + i * ld;
      const __m512 vsub = _mm512_set1_ps(m[i]);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t j = 0; j < cols; j += 32) {
        __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
        if (j < lim[i]) acc = _mm512_add_ps(acc, lo = prob16(r, j, lim[i], vs, bias, vsub));
        if (j + 16 < lim[i]) acc = _mm512_add_ps(acc, hi = prob16(r, j + 16, lim[i], vs, bias, vsub));
        const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        _mm512_mask_storeu_epi32(words + i * wpr + j / 2, live16(j / 2, wpr), pairs);
      }
      _mm512_storeu_ps(work + 16 * i, acc);
    }
  }
  static A a_probs(const float*, int64_t, int64_t cols, int64_t, float* w) {
    return {reinterpret_cast<const Word*>(w), (cols + 1) / 2, 1};
  }
  // The columns of m: m packed (pairs of its rows), read across.
  static const float* m_from(const float* m, int64_t ld, int64_t d0) { return m + d0 / 2 * ld; }
  static A a_cols(const float* m, int64_t ld, int64_t depth, int64_t n, float* w) {
    return {reinterpret_cast<const Word*>(pack(m, depth, ld, n, w)), 1, ld};
  }
  static void gemm(const A& a, int64_t rows, const float* m, int64_t ld, int64_t depth, int64_t cols, float* out,
                   int64_t ldo, bool acc) {
    if (depth <= 0) {
      if (!acc)
        for (int64_t i = 0; i < rows; ++i) std::fill(out + i * ldo, out + i * ldo + cols, 0.0f);
      return;
    }
    const Word* mw = reinterpret_cast<const Word*>(m);
    for (int64_t i = 0; i < rows; i += kRows)
      for (int64_t j0 = 0; j0 < cols; j0 += 64)
        by_block<GemmBf16>(std::min(kRows, rows - i), cols - j0, a.p + i * a.rs, a.rs, a.ps, mw + j0, ld, depth,
                           out + i * ldo + j0, ldo, acc);
  }
};
#pragma GCC diagnostic pop

bool use_avx512() {
  static const bool yes = cpu_features().avx512f;
  return yes;
}

bool use_avx2() {
  static const bool yes = cpu_features().avx2 && cpu_features().fma;
  return yes;
}

// bf16 inputs on a CPU with AVX512-BF16 (MIXPREC_CPU_DISABLE=avx512_bf16 hides it).
bool use_bf16_dot(DType dt) {
  static const bool yes =
      cpu_features().avx512f && cpu_features().avx512bw && cpu_features().avx512vl && cpu_features().avx512_bf16;
  return yes && dt == DType::bf16;
}

// Floats a packed [depth, ld] operand takes (Bf16Dot::pack; the others need none).
inline int64_t packed_floats(int64_t depth, int64_t ld) { return (depth + 1) / 2 * ld; }

// One row of 16-bit values widened to f32, and f32 rounded to 16 bits (then, with scale != 1,
// widened, multiplied by scale in f32 and rounded again: scale_elements' rule), in
// registers by convert_simd.h's rules (the bits of convert_elements): a call of
// convert_elements per row of D = 32 cost more than its conversion (perf).
bool use_avx512_16bit() {
  static const bool yes = simd::cpu_runs_widen16();
  return yes;
}
// (GCC 12's -Wmaybe-uninitialized false positive on masked intrinsics, as above.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <DType kDt>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void widen_row16(const void* src, float* dst, int64_t w) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t j = 0; j < w; j += 16) {
    const __mmask16 k = lanes16(j, w);
    _mm512_mask_storeu_ps(dst + j, k, simd::widen16<kDt>(_mm256_maskz_loadu_epi16(k, s + j)));
  }
}
template <DType kDt>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void narrow_row16(const float* src, void* dst, int64_t w,
                                                                            float scale) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < w; j += 16) {
    const __mmask16 k = lanes16(j, w);
    __m256i r = simd::narrow16<kDt>(_mm512_maskz_loadu_ps(k, src + j));
    if (scale != 1.0f) r = simd::narrow16<kDt>(_mm512_mul_ps(simd::widen16<kDt>(r), vs));
    _mm256_mask_storeu_epi16(d + j, k, r);
  }
}
#pragma GCC diagnostic pop

// An operand's rows: row r of head n at p + ((n / heads) sb + (n % heads) sh + r ld)
// elements, each dense. A contiguous [N, S, w] tensor has heads 1, sb = S w, ld = w; a
// [B, H, S, w] view (a head's columns of a packed [B*S, 3E] qkv, or of a [B*S, E] context)
// its four strides.
struct Rows {
  char* p = nullptr;
  DType dt = DType::f32;
  int64_t heads = 1, sb = 0, sh = 0, ld = 0;
  char* row(int64_t n, int64_t r) const {
    return p + size_t((n / heads) * sb + (n % heads) * sh + r * ld) * dtype_size(dt);
  }
  // bf16 rows of w elements that are pairs of bf16 in 32-bit words, read in place by Bf16Dot.
  bool words(int64_t w) const { return dt == DType::bf16 && w % 2 == 0 && ld % 2 == 0; }
};
Rows rows_of(const Tensor& t) {
  Rows x;
  x.p = static_cast<char*>(const_cast<void*>(t.data()));
  x.dt = t.dtype();
  const Shape& st = t.strides();
  if (t.dim() == 4) {
    x.heads = t.size(1), x.sb = st[0], x.sh = st[1], x.ld = st[2];
  } else {
    x.sb = st[0], x.ld = st[1];
  }
  return x;
}

// What every tile reads: the operands as rows, the geometry, the key bias in C.
template <typename C>
struct Ctx {
  static constexpr DType cdt = std::is_same_v<C, double> ? DType::f64 : DType::f32;
  Rows q, k, v;
  DType dt = DType::f32;
  int64_t N = 0, S = 0, D = 0, Dv = 0, heads = 1, bs = 1, nb = 0;
  bool causal = false;
  C scale = 1;
  std::vector<C> bias;        // [B, S], or empty
  std::vector<uint8_t> skip;  // [B, nb]: 1 for a key block the tiles skip, or empty

  // Rows [r0, r0 + rows) (w wide) of head n of x, converted to C into dst [rows, w]: one
  // conversion when they are adjacent, else row by row (rows of a head's columns of a wider
  // tensor; 16-bit ones in registers, convert_rows).
  void load(const Rows& x, int64_t n, int64_t r0, int64_t rows, int64_t w, C* dst) const {
    if (x.ld == w) return convert_elements(x.row(n, r0), x.dt, dst, cdt, rows * w);
    for (int64_t i = 0; i < rows; ++i) widen_row(x.row(n, r0 + i), x.dt, dst + i * w, w);
  }
  // src [rows, w] into those rows of x, rounded to x's dtype and then, with scale != 1,
  // multiplied by it and rounded again (scale_elements' rule: the chain rule of a scaled
  // copy, with its bits).
  void store(const C* src, const Rows& x, int64_t n, int64_t r0, int64_t rows, int64_t w, double scale = 1.0) const {
    if (x.ld == w) {
      convert_elements(src, cdt, x.row(n, r0), x.dt, rows * w);
      if (scale != 1.0) scale_elements(x.row(n, r0), x.dt, rows * w, scale);
      return;
    }
    for (int64_t i = 0; i < rows; ++i) narrow_row(src + i * w, x.row(n, r0 + i), x.dt, w, scale);
  }
  static void widen_row(const void* src, DType from, C* dst, int64_t w) {
    if constexpr (std::is_same_v<C, float>)
      if (use_avx512_16bit() && (from == DType::bf16 || from == DType::f16))
        return from == DType::bf16 ? widen_row16<DType::bf16>(src, dst, w) : widen_row16<DType::f16>(src, dst, w);
    convert_elements(src, from, dst, cdt, w);
  }
  static void narrow_row(const C* src, void* dst, DType to, int64_t w, double scale) {
    if constexpr (std::is_same_v<C, float>)
      if (use_avx512_16bit() && (to == DType::bf16 || to == DType::f16))
        return to == DType::bf16 ? narrow_row16<DType::bf16>(src, dst, w, float(scale))
                                 : narrow_row16<DType::f16>(src, dst, w, float(scale));
    convert_elements(src, cdt, dst, to, w);
    if (scale != 1.0) scale_elements(dst, to, w, scale);
  }
  const C* bias_at(int64_t n, int64_t c0) const { return bias.empty() ? nullptr : bias.data() + (n / heads) * S + c0; }
  bool skipped(int64_t n, int64_t kb) const { return !skip.empty() && skip[size_t((n / heads) * nb + kb)]; }
  // Key blocks a query block [r0, r0 + rows) meets: with causal, none past its last row.
  int64_t key_blocks(int64_t r0, int64_t rows) const { return causal ? (r0 + rows - 1) / bs + 1 : nb; }
  // Keys of the block [c0, c0 + cols) that query row r sees (<= 0: none).
  int64_t visible(int64_t r, int64_t c0, int64_t cols) const { return causal ? std::min(cols, r - c0 + 1) : cols; }
};


template <typename C>
Ctx<C> make_ctx(const FlashAttention& t) {
  Ctx<C> g;
  g.q = rows_of(t.q), g.k = rows_of(t.k), g.v = rows_of(t.v);
  g.dt = t.q.dtype();
  const bool four = t.q.dim() == 4;
  g.N = four ? t.q.size(0) * t.q.size(1) : t.q.size(0);
  g.S = t.q.size(four ? 2 : 1), g.D = t.q.size(four ? 3 : 2), g.Dv = t.v.size(t.v.dim() - 1);
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

// ---- The products' operands from a block of an input: rows [r0, r0 + rows) of head n of
// `base` (dtype from, w wide). Loaded into buf (converted to C) and then put in I's form; on
// the Bf16Dot path a bf16 input of even width is read in place instead (its rows already are
// bf16 pairs; K^T and V^T are a transpose of those words, the row pairs an interleave): no
// widening, no rounding back.
template <typename I>
constexpr bool kReadsBf16 = std::is_same_v<I, Bf16Dot>;

// A over the rows (depth w) and A over the columns (depth rows): Q and dO in the backward.
template <typename C, typename I>
std::pair<typename I::A, typename I::A> in_rows_cols(const Ctx<C>& g, const Rows& x, int64_t n, int64_t r0,
                                                     int64_t rows, int64_t w, C* buf, C* wr, C* wc) {
  if constexpr (kReadsBf16<I>)
    if (x.words(w)) {
      const void* src = x.row(n, r0);
      I::interleave(static_cast<const uint16_t*>(src), rows, w, x.ld, reinterpret_cast<Word*>(wc));
      return {{static_cast<const Word*>(src), x.ld / 2, 1}, {reinterpret_cast<const Word*>(wc), 1, w}};
    }
  g.load(x, n, r0, rows, w, buf);
  return {I::a_rows(buf, w, w, rows, wr), I::a_cols(buf, w, rows, w, wc)};
}
// A over the rows only: Q in the forward, Q and dO in backward_q_tile.
template <typename C, typename I>
typename I::A in_rows(const Ctx<C>& g, const Rows& x, int64_t n, int64_t r0, int64_t rows, int64_t w, C* buf,
                      C* wr) {
  if constexpr (kReadsBf16<I>)
    if (x.words(w)) return {reinterpret_cast<const Word*>(x.row(n, r0)), x.ld / 2, 1};
  g.load(x, n, r0, rows, w, buf);
  return I::a_rows(buf, w, w, rows, wr);
}
// B of depth w, the block transposed ([w, rows], ld bs): K^T for the scores, V^T for dP.
template <typename C, typename I>
const C* in_t(const Ctx<C>& g, const Rows& x, int64_t n, int64_t r0, int64_t rows, int64_t w, C* buf, C* t,
              C* pk) {
  if constexpr (kReadsBf16<I>)
    if (x.words(w)) {
      transpose_words(reinterpret_cast<const Word*>(x.row(n, r0)), rows, w / 2, x.ld / 2, reinterpret_cast<Word*>(pk),
                      g.bs);
      return pk;
    }
  g.load(x, n, r0, rows, w, buf);
  I::transpose(buf, rows, w, t, g.bs);
  return I::pack(t, w, g.bs, rows, pk);
}
// B of depth rows, the block as it is ([rows, w], ld w): V for P V, K for dS K.
template <typename C, typename I>
const C* in_n(const Ctx<C>& g, const Rows& x, int64_t n, int64_t r0, int64_t rows, int64_t w, C* buf, C* pk) {
  if constexpr (kReadsBf16<I>)
    if (x.words(w)) {
      I::interleave(reinterpret_cast<const uint16_t*>(x.row(n, r0)), rows, w, x.ld, reinterpret_cast<Word*>(pk));
      return pk;
    }
  g.load(x, n, r0, rows, w, buf);
  return I::pack(buf, rows, w, w, pk);
}

// Scratch a thread needs for any tile (elements of C): the tiles' own buffers from buf, the
// packed operands after them (packs(g, buf)), then gemm's work (Bf16Dot's bf16 rows).
template <typename C>
int64_t tile_size(const Ctx<C>& g) {
  return g.bs * (8 * g.D + 6 * g.Dv + 2 * g.bs + 22);
}
template <typename C>
int64_t packs_size(const Ctx<C>& g) {
  // The most a tile packs: backward_kv_tile's K^T, V^T, K, P and dS; the forward's V.
  return packed_floats(g.D, g.bs) + packed_floats(g.Dv, g.bs) + packed_floats(g.bs, g.D) +
         packed_floats(g.bs, g.Dv) + 2 * packed_floats(g.bs, g.bs);
}
template <typename C>
C* packs(const Ctx<C>& g, C* buf) {
  return buf + tile_size(g);
}
template <typename C>
C* work(const Ctx<C>& g, C* buf) {
  return buf + tile_size(g) + packs_size(g);
}
// gemm's first operands in Bf16Dot's form (the others take none): a tile's Q, dO and P or dS
// rows, and the columns of Q and dO, at these offsets.
template <typename C>
struct Work {
  C *q, *dout, *s, *qcols, *doutcols;
  Work(const Ctx<C>& g, C* w)
      : q(w),
        dout(q + g.bs * ((g.D + 1) / 2)),
        s(dout + g.bs * ((g.Dv + 1) / 2)),
        qcols(s + g.bs * ((g.bs + 1) / 2)),
        doutcols(qcols + packed_floats(g.bs, g.D)) {}
  static int64_t size(const Ctx<C>& g) {
    return g.bs * ((g.D + 1) / 2 + (g.Dv + 1) / 2 + (g.bs + 1) / 2) + packed_floats(g.bs, g.D) +
           packed_floats(g.bs, g.Dv);
  }
};
template <typename C>
size_t scratch_size(const Ctx<C>& g) {
  return size_t(tile_size(g) + packs_size(g) + Work<C>::size(g));
}

// out row i += a row i times m's first lim(i) rows, for i < rows, with lim(i) growing with
// i (causal) or constant: in blocks of kRows rows, each to its last row's lim; a row's entries
// of a past its own lim must be 0. The blocks are the same wherever a product is taken
// (backward_kv_tile's dQ terms and backward_q_tile's), so are the bits.
template <typename C, typename I, typename Lim>
void gemm_rows(const typename I::A& a, int64_t rows, const C* m, int64_t ld, int64_t cols, C* out, int64_t ldo,
               Lim lim) {
  for (int64_t i = 0; i < rows; i += kRows) {
    const int64_t h = std::min(kRows, rows - i), depth = lim(i + h - 1);
    if (depth > 0) I::gemm(a.from(i), h, m, ld, depth, cols, out + i * ldo, ldo, true);
  }
}

// out := a times m for the rows of a block of scores, each row only as far as it sees:
// rows in groups of kRows, each group's columns up to its last row's lim (causal: a diagonal
// block's upper triangle is not computed, ~1/4 of the block's products), none for a group
// that sees nothing. Each computed element is the same sum as over every column, and the
// callers zero every entry past a row's own lim.
template <typename C, typename I, typename Lim>
void scores_rows(const typename I::A& a, int64_t rows, const C* m, int64_t ld, int64_t depth, int64_t cols, C* out,
                 int64_t ldo, Lim lim) {
  for (int64_t i = 0; i < rows; i += kRows) {
    const int64_t h = std::min(kRows, rows - i), c = std::min(cols, lim(i + h - 1));
    if (c > 0) I::gemm(a.from(i), h, m, ld, depth, c, out + i * ldo, ldo, false);
  }
}

// ---- forward: one head's block of query rows against every key block it sees. Per key
// block: the scores of all rows (S = Q K^T, every column; a causal diagonal block's hidden
// ones are dropped next), then each row's online-softmax step (its max, e^(s - m) on its
// visible keys, 0 past them, the running sum and output rescaled), then O += P V.
template <typename C, typename I>
void forward_tile(const Ctx<C>& g, int64_t n, int64_t qb, C* buf, const Rows& out, C* lse) {
  const int64_t bs = g.bs, D = g.D, Dv = g.Dv, S = g.S, r0 = qb * bs, rows = std::min(bs, S - r0);
  C *Q = buf, *Kr = Q + bs * D, *Kt = Kr + bs * D, *V = Kt + bs * D, *P = V + bs * Dv, *O = P + bs * bs,
    *m = O + bs * Dv, *l = m + bs, *alpha = l + bs, *sm = alpha + bs;
  std::vector<int64_t> lims(static_cast<size_t>(rows));
  const Work<C> w(g, work(g, buf));
  const auto Qa = in_rows<C, I>(g, g.q, n, r0, rows, D, Q, w.q);
  std::fill(O, O + rows * Dv, C(0));
  std::fill(m, m + rows, -std::numeric_limits<C>::infinity());
  std::fill(l, l + rows, C(0));
  for (int64_t kb = 0, kend = g.key_blocks(r0, rows); kb < kend; ++kb) {
    if (g.skipped(n, kb)) continue;
    const int64_t c0 = kb * bs, cols = std::min(bs, S - c0);
    const C* Ktp = in_t<C, I>(g, g.k, n, c0, cols, D, Kr, Kt, packs(g, buf));
    const C* Vp = in_n<C, I>(g, g.v, n, c0, cols, Dv, V, packs(g, buf) + packed_floats(D, bs));
    const C* bias = g.bias_at(n, c0);
    const auto lim_of = [&](int64_t i) { return g.visible(r0 + i, c0, cols); };
    scores_rows<C, I>(Qa, rows, Ktp, bs, D, cols, P, bs, lim_of);
    for (int64_t i = 0; i < rows; ++i) {
      lims[size_t(i)] = std::max<int64_t>(g.visible(r0 + i, c0, cols), 0);
      std::fill(P + i * bs + lims[size_t(i)], P + i * bs + cols, C(0));
    }
    I::softmax_block(P, bs, rows, lims.data(), cols, g.scale, bias, m, l, alpha, sm, w.s);
    // The output rescaled to the new max (nothing to rescale at first).
    if (kb > 0)
      for (int64_t i = 0; i < rows; ++i)
        if (alpha[i] != C(1)) I::scale_row(O + i * Dv, Dv, alpha[i]);
    gemm_rows<C, I>(I::a_probs(P, bs, cols, rows, w.s), rows, Vp, Dv, Dv, O, Dv, lim_of);
  }
  for (int64_t i = 0; i < rows; ++i) {
    I::scale_row(O + i * Dv, Dv, C(1) / l[i]);
    lse[n * S + r0 + i] = m[i] + std::log(l[i]);
  }
  g.store(O, out, n, r0, rows, Dv);
}

// ---- backward. A tile's rows [r0, r0 + rows) against its keys [c0, c0 + cols):
// P = e^(scale Q K^T + bias - lse) and dS = P (dP - D) scale, dP = dO V^T; entries past a
// row's visible keys set to 0 (they feed column sums).
template <typename C, typename I>
void probs_and_dscores(const Ctx<C>& g, const typename I::A& Qa, const typename I::A& dOa, int64_t r0, int64_t rows,
                       const C* Ktp, const C* Vtp, const C* bias, int64_t c0, int64_t cols, const C* lse,
                       const C* delta, C* P, C* dS) {
  const auto lim_of = [&](int64_t i) { return g.visible(r0 + i, c0, cols); };
  scores_rows<C, I>(Qa, rows, Ktp, g.bs, g.D, cols, P, g.bs, lim_of);
  scores_rows<C, I>(dOa, rows, Vtp, g.bs, g.Dv, cols, dS, g.bs, lim_of);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t lim = std::max<int64_t>(g.visible(r0 + i, c0, cols), 0);
    C *p = P + i * g.bs, *ds = dS + i * g.bs;
    if (lim > 0) I::probs_dscores(p, ds, lim, g.scale, bias, lse[r0 + i], delta[r0 + i]);
    std::fill(p + lim, p + cols, C(0));
    std::fill(ds + lim, ds + cols, C(0));
  }
}

struct Grads {
  Rows dout, dq, dk, dv;
  double dq_scale;  // dQ's rows are rounded, then scaled (FlashGradients)
};

// dK and dV of one head's key block, summed over the query blocks that see it. With dq (the
// head's [S, D] dQ in C, when one thread does the whole head), also each query row's dS K
// term for this key block: the same values in the same order (key blocks ascending) as
// backward_q_tile adds them, so either way gives the same bits.
template <typename C, typename I>
void backward_kv_tile(const Ctx<C>& g, const C* lse, const C* delta, const Grads& gr, int64_t n, int64_t kb, C* buf,
                      C* dq = nullptr) {
  const int64_t bs = g.bs, D = g.D, Dv = g.Dv, S = g.S, c0 = kb * bs, cols = std::min(bs, S - c0);
  // dK and dV rows [cols, D] and [cols, Dv]: the keys are the products' rows (A: the columns
  // of dS and P), Q and dO in their packed form the other operand; stored as they are.
  C *Kt = buf, *Vt = Kt + bs * D, *tmp = Vt + bs * Dv, *Q = tmp + bs * std::max(D, Dv), *dO = Q + bs * D,
    *P = dO + bs * Dv, *dS = P + bs * bs, *dK = dS + bs * bs, *dV = dK + bs * D, *Kr = dV + bs * Dv;
  const Work<C> w(g, work(g, buf));
  std::fill(dK, dK + cols * D, C(0));
  std::fill(dV, dV + cols * Dv, C(0));
  if (!g.skipped(n, kb)) {
    C* pk = packs(g, buf);
    const C* Ktp = in_t<C, I>(g, g.k, n, c0, cols, D, tmp, Kt, pk);
    const C* Vtp = in_t<C, I>(g, g.v, n, c0, cols, Dv, tmp, Vt, pk += packed_floats(D, bs));
    const C* Krp = in_n<C, I>(g, g.k, n, c0, cols, D, Kr, pk += packed_floats(Dv, bs));
    C* Pp = pk += packed_floats(bs, D);
    C* dSp = pk + packed_floats(bs, bs);
    const C* bias = g.bias_at(n, c0);
    for (int64_t qb = g.causal ? c0 / bs : 0; qb < g.nb; ++qb) {
      const int64_t r0 = qb * bs, rows = std::min(bs, S - r0);
      const auto [Qa, Qc] = in_rows_cols<C, I>(g, g.q, n, r0, rows, D, Q, w.q, w.qcols);
      const auto [dOa, dOc] = in_rows_cols<C, I>(g, gr.dout, n, r0, rows, Dv, dO, w.dout, w.doutcols);
      probs_and_dscores<C, I>(g, Qa, dOa, r0, rows, Ktp, Vtp, bias, c0, cols, lse + n * S, delta + n * S, P, dS);
      // dV += P^T dO, dK += dS^T Q, kRows keys at a time, each group's terms from its first
      // key's first query row on (causal: c0 + i - r0, rounded down to a pair; P and dS are 0
      // above it, so only zero terms are left out: ~1/2 of a diagonal block's products).
      const typename I::A Pc = I::a_cols(P, bs, rows, cols, Pp), dSc = I::a_cols(dS, bs, rows, cols, dSp);
      const C *dOm = reinterpret_cast<const C*>(dOc.p), *Qm = reinterpret_cast<const C*>(Qc.p);
      for (int64_t i = 0; i < cols; i += kRows) {
        const int64_t h = std::min(kRows, cols - i), d0 = g.causal ? std::max<int64_t>(c0 + i - r0, 0) / 2 * 2 : 0;
        if (d0 >= rows) break;
        I::gemm(Pc.from(i).from_depth(d0), h, I::m_from(dOm, Dv, d0), Dv, rows - d0, Dv, dV + i * Dv, Dv, true);
        I::gemm(dSc.from(i).from_depth(d0), h, I::m_from(Qm, D, d0), D, rows - d0, D, dK + i * D, D, true);
      }
      if (dq)  // dQ_i += sum_j dS_ij K_j
        gemm_rows<C, I>(I::a_rows(dS, bs, cols, rows, w.s), rows, Krp, D, D, dq + r0 * D, D,
                        [&](int64_t i) { return g.visible(r0 + i, c0, cols); });
    }
  }
  g.store(dK, gr.dk, n, c0, cols, D);
  g.store(dV, gr.dv, n, c0, cols, Dv);
}

// dQ of one head's query block, summed over the key blocks it sees.
template <typename C, typename I>
void backward_q_tile(const Ctx<C>& g, const C* lse, const C* delta, const Grads& gr, int64_t n, int64_t qb, C* buf) {
  const int64_t bs = g.bs, D = g.D, Dv = g.Dv, S = g.S, r0 = qb * bs, rows = std::min(bs, S - r0);
  C *Kr = buf, *Kt = Kr + bs * D, *Vt = Kt + bs * D, *tmp = Vt + bs * Dv, *Q = tmp + bs * std::max(D, Dv), *dO = Q + bs * D,
    *P = dO + bs * Dv, *dS = P + bs * bs, *dQ = dS + bs * bs;
  const Work<C> w(g, work(g, buf));
  const auto Qa = in_rows<C, I>(g, g.q, n, r0, rows, D, Q, w.q);
  const auto dOa = in_rows<C, I>(g, gr.dout, n, r0, rows, Dv, dO, w.dout);
  std::fill(dQ, dQ + rows * D, C(0));
  for (int64_t kb = 0, kend = g.key_blocks(r0, rows); kb < kend; ++kb) {
    if (g.skipped(n, kb)) continue;
    const int64_t c0 = kb * bs, cols = std::min(bs, S - c0);
    C* pk = packs(g, buf);
    const C* Ktp = in_t<C, I>(g, g.k, n, c0, cols, D, tmp, Kt, pk);
    const C* Vtp = in_t<C, I>(g, g.v, n, c0, cols, Dv, tmp, Vt, pk += packed_floats(D, bs));
    const C* Krp = in_n<C, I>(g, g.k, n, c0, cols, D, Kr, pk + packed_floats(Dv, bs));
    const C* bias = g.bias_at(n, c0);
    probs_and_dscores<C, I>(g, Qa, dOa, r0, rows, Ktp, Vtp, bias, c0, cols, lse + n * S, delta + n * S, P, dS);
    gemm_rows<C, I>(I::a_rows(dS, bs, cols, rows, w.s), rows, Krp, D, D, dQ, D,
                    [&](int64_t i) { return g.visible(r0 + i, c0, cols); });  // dQ_i += sum_j dS_ij K_j
  }
  g.store(dQ, gr.dq, n, r0, rows, D, gr.dq_scale);
}

// The calling thread's scratch of at least n elements (slot 0: the tiles' buffers; 1: the
// one-pass backward's dQ), kept across calls: a fresh zeroed buffer per call and thread
// (~150 KB at gpt-tiny's shape, above malloc's mmap threshold) cost its page faults and
// memset every call (~3% of the kernel's time, perf). Every tile writes what it reads.
template <typename C>
C* thread_scratch(size_t n, int slot) {
  thread_local std::vector<C> bufs[2];
  std::vector<C>& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// Runs body(n, block, scratch) for every (head, block) on the OpenMP threads, the blocks
// from last to first (with causal, the last query blocks have the most work: dynamic
// scheduling then balances the rest). The results do not depend on the order.
template <typename C, typename Body>
void for_each_tile(const Ctx<C>& g, Body body) {
  const int64_t tasks = g.N * g.nb;
#pragma omp parallel if (tasks > 1)
  {
    C* buf = thread_scratch<C>(scratch_size(g), 0);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) body(task % g.N, g.nb - 1 - task / g.N, buf);
  }
}

template <typename C, typename I>
void forward(FlashAttention& t) {
  const Ctx<C> g = make_ctx<C>(t);
  if (!t.out.defined()) t.out = Tensor::empty({g.N, g.S, g.Dv}, g.dt);
  t.lse = Tensor::empty({g.N, g.S}, Ctx<C>::cdt);
  const Rows out = rows_of(t.out);
  C* lse = t.lse.data_ptr<C>();
  for_each_tile(g, [&](int64_t n, int64_t qb, C* buf) { forward_tile<C, I>(g, n, qb, buf, out, lse); });
}

template <typename C, typename I>
std::vector<Tensor> backward(const FlashAttention& t, const Tensor& d_out, const FlashGradients& into) {
  const Ctx<C> g = make_ctx<C>(t);
  const Tensor dout = d_out.is_contiguous() || (d_out.dim() == 4 && d_out.strides()[3] == 1) ? d_out : d_out.contiguous();
  const Rows dout_rows = rows_of(dout), out_rows = rows_of(t.out);
  // delta = rowsum(dO * O): the row's sum of P * dP, without the scores.
  Tensor delta_t = Tensor::empty({g.N, g.S}, Ctx<C>::cdt);
  C* delta = delta_t.data_ptr<C>();
  const auto delta_block = [&](int64_t n, int64_t qb, C* buf) {
    const int64_t r0 = qb * g.bs, rows = std::min(g.bs, g.S - r0);
    C *a = buf, *b = buf + g.bs * g.Dv;
    g.load(dout_rows, n, r0, rows, g.Dv, a);
    g.load(out_rows, n, r0, rows, g.Dv, b);
    for (int64_t i = 0; i < rows; ++i) delta[n * g.S + r0 + i] = I::dot(a + i * g.Dv, b + i * g.Dv, g.Dv);
  };
  const Tensor dq = into.dq.defined() ? into.dq : Tensor::empty({g.N, g.S, g.D}, g.dt),
               dk = into.dk.defined() ? into.dk : Tensor::empty({g.N, g.S, g.D}, g.dt),
               dv = into.dv.defined() ? into.dv : Tensor::empty({g.N, g.S, g.Dv}, g.dt);
  const Grads gr{dout_rows, rows_of(dq), rows_of(dk), rows_of(dv), into.dq_scale};
  const C* lse = t.lse.data_ptr<C>();
  if (g.N >= 2 * int64_t(omp_get_max_threads())) {
    // Heads enough for every thread: one pass, a thread per head, dQ with dK and dV (5 block
    // products instead of 7; the same bits as the two passes).
#pragma omp parallel
    {
      C *buf = thread_scratch<C>(scratch_size(g), 0), *dq = thread_scratch<C>(size_t(g.S * g.D), 1);
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < g.N; ++n) {
        // The head's delta first, in the same parallel region: one fork and barrier less (with
        // libgomp's spinning wait, each costs the other thread's CPU time on a busy machine).
        for (int64_t qb = 0; qb < g.nb; ++qb) delta_block(n, qb, buf);
        std::fill(dq, dq + g.S * g.D, C(0));
        for (int64_t kb = 0; kb < g.nb; ++kb) backward_kv_tile<C, I>(g, lse, delta, gr, n, kb, buf, dq);
        g.store(dq, gr.dq, n, 0, g.S, g.D, gr.dq_scale);
      }
    }
    return {dq, dk, dv};
  }
  for_each_tile(g, delta_block);
  for_each_tile(g, [&](int64_t n, int64_t kb, C* buf) { backward_kv_tile<C, I>(g, lse, delta, gr, n, kb, buf); });
  for_each_tile(g, [&](int64_t n, int64_t qb, C* buf) { backward_q_tile<C, I>(g, lse, delta, gr, n, qb, buf); });
  return {dq, dk, dv};
}

}  // namespace

void flash_attention_forward(FlashAttention& t) {
  if (t.q.dtype() == DType::f64) return forward<double, Plain<double>>(t);
  if (use_bf16_dot(t.q.dtype())) return forward<float, Bf16Dot>(t);
  if (use_avx512()) return forward<float, Avx512>(t);
  if (use_avx2()) return forward<float, Avx2>(t);
  forward<float, Plain<float>>(t);
}

std::vector<Tensor> flash_attention_backward(const FlashAttention& t, const Tensor& d_out,
                                             const FlashGradients& into) {
  if (t.q.dtype() == DType::f64) return backward<double, Plain<double>>(t, d_out, into);
  if (use_bf16_dot(t.q.dtype())) return backward<float, Bf16Dot>(t, d_out, into);
  if (use_avx512()) return backward<float, Avx512>(t, d_out, into);
  if (use_avx2()) return backward<float, Avx2>(t, d_out, into);
  return backward<float, Plain<float>>(t, d_out, into);
}

}  // namespace mixprec::backend::cpu
