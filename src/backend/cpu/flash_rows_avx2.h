// backend/cpu/flash_rows_avx2.h: the fused attention's row primitives with AVX2 + FMA, 8
// floats per register, for CPUs without AVX-512 (Zen 2/3, Intel before Skylake-SP and most
// laptops): the contracts of flash_attention.cpp's Plain<float> (the register-blocked product,
// the online softmax's steps, the backward's probabilities and score gradients), used by its
// Avx2 policy. Plain loops there ran the fused attention ~5x slower than oneDNN's AVX2
// GEMMs run the unfused route (bench/bench_attention.cpp), so without these an AVX2 CPU took
// the fused kernel only for its memory, from 1024 positions. Tails are masked loads and stores
// (maskload/maskstore), never reads past a row's end. exp is core/vector_exp.h's exp_avx2:
// clamped below at -87 (a probability of ~1e-38 where Plain's std::exp gives 0).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/vector_exp.h"

namespace mixprec::backend::cpu::flash_avx2 {

// maskload/maskstore's mask for elements i .. i+7 of a row of n (n > i).
__attribute__((target("avx2"))) inline __m256i live8(int64_t i, int64_t n) {
  const int k = int(std::min<int64_t>(n - i, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

__attribute__((target("avx2"))) inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

// out[r ldo + j] (+ with acc)= sum_d a[r rs + d ds] m[d ld + j] for r < R, j < min(left, 8 NV):
// R x NV sums in registers over the whole depth (4 x 2 with the operands: 11 of 16 ymm).
template <int R, int NV>
struct Gemm8 {
  __attribute__((target("avx2,fma"))) static void run(int64_t left, const float* a, int64_t rs, int64_t ds,
                                                      const float* m, int64_t ld, int64_t depth, float* out,
                                                      int64_t ldo, bool acc) {
    __m256i k[NV];
    __m256 c[R][NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) k[v] = 8 * v < left ? live8(8 * v, left) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        c[r][v] = acc ? _mm256_maskload_ps(out + r * ldo + 8 * v, k[v]) : _mm256_setzero_ps();
    for (int64_t d = 0; d < depth; ++d) {
      __m256 b[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) b[v] = _mm256_maskload_ps(m + d * ld + 8 * v, k[v]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_set1_ps(a[r * rs + d * ds]);
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) c[r][v] = _mm256_fmadd_ps(x, b[v], c[r][v]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) _mm256_maskstore_ps(out + r * ldo + 8 * v, k[v], c[r][v]);
  }
};

template <int R>
inline void gemm_block(int64_t left, const float* a, int64_t rs, int64_t ds, const float* m, int64_t ld,
                       int64_t depth, float* out, int64_t ldo, bool acc) {
  if (left > 8) Gemm8<R, 2>::run(left, a, rs, ds, m, ld, depth, out, ldo, acc);
  else Gemm8<R, 1>::run(left, a, rs, ds, m, ld, depth, out, ldo, acc);
}

// Plain's gemm: out[i ldo + j] (+ with acc)= sum_{d < depth} a(i, d) m[d ld + j], i < rows,
// j < cols, each sum in the order of d; a(i, d) = a[i rs + d ds].
inline void gemm(const float* a, int64_t rs, int64_t ds, int64_t rows, const float* m, int64_t ld, int64_t depth,
                 int64_t cols, float* out, int64_t ldo, bool acc) {
  for (int64_t i = 0; i < rows; i += 4)
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const float* ai = a + i * rs;
      float* o = out + i * ldo + j0;
      const int64_t left = cols - j0;
      switch (std::min<int64_t>(4, rows - i)) {
        case 4: gemm_block<4>(left, ai, rs, ds, m + j0, ld, depth, o, ldo, acc); break;
        case 3: gemm_block<3>(left, ai, rs, ds, m + j0, ld, depth, o, ldo, acc); break;
        case 2: gemm_block<2>(left, ai, rs, ds, m + j0, ld, depth, o, ldo, acc); break;
        default: gemm_block<1>(left, ai, rs, ds, m + j0, ld, depth, o, ldo, acc); break;
      }
    }
}

// The probability e^(scale r[j..] + bias[j..] - sub) of the 8 entries from j (0 past lim).
__attribute__((target("avx2,fma"))) inline __m256 prob8(const float* r, int64_t j, int64_t lim, __m256 vs,
                                                        const float* bias, __m256 vsub) {
  const __m256i k = live8(j, lim);
  const __m256 b = bias ? _mm256_maskload_ps(bias + j, k) : _mm256_setzero_ps();
  const __m256 x = _mm256_fmadd_ps(_mm256_maskload_ps(r + j, k), vs, b);
  return _mm256_and_ps(exp_avx2(_mm256_sub_ps(x, vsub)), _mm256_castsi256_ps(k));
}

// Plain's softmax_block, the same contract: each row's max, then its exps and their sum,
// with the rows' running max m, sum l and the rescale alpha.
__attribute__((target("avx2,fma"))) inline void softmax_block(float* s, int64_t ld, int64_t rows, const int64_t* lim,
                                                              float scale, const float* bias, float* m, float* l,
                                                              float* alpha) {
  const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < rows; ++i) {
    alpha[i] = 1.0f;
    if (lim[i] == 0) continue;
    float* r = s + i * ld;
    __m256 mx = ninf;
    for (int64_t j = 0; j < lim[i]; j += 8) {
      const __m256i k = live8(j, lim[i]);
      const __m256 b = bias ? _mm256_maskload_ps(bias + j, k) : _mm256_setzero_ps();
      const __m256 x = _mm256_fmadd_ps(_mm256_maskload_ps(r + j, k), vs, b);
      mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(k)));
    }
    const float m_new = std::max(m[i], hmax(mx));
    alpha[i] = m[i] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m[i] - m_new);
    const __m256 vsub = _mm256_set1_ps(m_new);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < lim[i]; j += 8) {
      const __m256 e = prob8(r, j, lim[i], vs, bias, vsub);
      _mm256_maskstore_ps(r + j, live8(j, lim[i]), e);
      acc = _mm256_add_ps(acc, e);
    }
    l[i] = l[i] * alpha[i] + hsum(acc);
    m[i] = m_new;
  }
}

// The backward's row: p[j] := e^(scale p[j] + bias[j] - lse), dp[j] := p[j] (dp[j] - delta) scale.
__attribute__((target("avx2,fma"))) inline void probs_dscores(float* p, float* dp, int64_t n, float scale,
                                                              const float* bias, float lse, float delta) {
  const __m256 vd = _mm256_set1_ps(delta), vs = _mm256_set1_ps(scale), vl = _mm256_set1_ps(lse);
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i k = live8(j, n);
    const __m256 e = prob8(p, j, n, vs, bias, vl);
    _mm256_maskstore_ps(p + j, k, e);
    const __m256 x = _mm256_sub_ps(_mm256_maskload_ps(dp + j, k), vd);
    _mm256_maskstore_ps(dp + j, k, _mm256_mul_ps(_mm256_mul_ps(e, x), vs));
  }
}

// sum_j a[j] b[j], 8 lanes of partial sums.
__attribute__((target("avx2,fma"))) inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i k = live8(j, n);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + j, k), _mm256_maskload_ps(b + j, k), acc);
  }
  return hsum(acc);
}

__attribute__((target("avx2"))) inline void scale_row(float* x, int64_t n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i k = live8(j, n);
    _mm256_maskstore_ps(x + j, k, _mm256_mul_ps(_mm256_maskload_ps(x + j, k), va));
  }
}

}  // namespace mixprec::backend::cpu::flash_avx2
