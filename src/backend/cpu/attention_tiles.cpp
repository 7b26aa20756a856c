// backend/cpu/attention_tiles.cpp: see attention_tiles.h. The row work of a tile (softmax,
// probabilities from the log-sum-exp, the scores' gradient) splits its rows over the threads;
// each row is max, exp and sum with its sums in double, so a long row's normaliser does not
// drift.
#include "backend/cpu/attention_tiles.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/vector_exp.h"

namespace mixprec::backend::cpu {

namespace {

constexpr int64_t kParallelRows = 8;
int64_t visible(int64_t S, int64_t r0, int64_t i, bool causal) { return causal ? std::min(S, r0 + i + 1) : S; }

// The float rows' hot loops, 16 lanes at a time where the CPU has AVX-512 (core/vector_exp.h's
// expf: ~1 ulp, the softmax kernel's), scalar elsewhere.
// GCC 12's _mm512_reduce_* and masked loads build on _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at each inlined use (a false positive, as in vector_exp.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) float row_max_avx512(const float* x, int64_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  float r = _mm512_reduce_max_ps(m);
  for (; j < n; ++j) r = std::max(r, x[j]);
  return r;
}
// x[j] := exp(scale x[j] - sub) for j < n; returns their sum.
__attribute__((target("avx512f"))) double scaled_exp_avx512(float* x, int64_t n, float scale, float sub) {
  __m512 acc = _mm512_setzero_ps();
  const __m512 vs = _mm512_set1_ps(scale), vsub = _mm512_set1_ps(sub);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 live = lanes16(j, n);
    const __m512 e = exp_avx512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(live, x + j), vs, vsub));
    _mm512_mask_storeu_ps(x + j, live, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(live, e));
  }
  return double(_mm512_reduce_add_ps(acc));
}
#pragma GCC diagnostic pop

bool use_avx512() {
  static const bool yes = cpu_features().avx512f;
  return yes;
}

// Row work for float rows: max, then x := exp(scale x - sub) with its sum.
float row_max(const float* x, int64_t n) {
  if (use_avx512()) return row_max_avx512(x, n);
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  return m;
}
double scaled_exp(float* x, int64_t n, float scale, float sub) {
  if (use_avx512()) return scaled_exp_avx512(x, n, scale, sub);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += (x[j] = std::exp(scale * x[j] - sub));
  return sum;
}

template <typename C>
void attention_softmax_tile(C* s, C* lse, int64_t N, int64_t rows, int64_t S, int64_t r0, bool causal, double scale) {
  const int64_t total = N * rows;
#pragma omp parallel for if (total >= kParallelRows)
  for (int64_t row = 0; row < total; ++row) {
    C* x = s + row * S;
    const int64_t i = row % rows, seen = visible(S, r0, i, causal);
    double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
    if constexpr (std::is_same_v<C, float>) {  // scale > 0: max(scale x) = scale max(x)
      m = double(float(scale) * row_max(x, seen));
      sum = scaled_exp(x, seen, float(scale), float(m));
    } else {
      for (int64_t j = 0; j < seen; ++j) m = std::max(m, scale * double(x[j]));
      for (int64_t j = 0; j < seen; ++j) sum += (x[j] = C(std::exp(scale * double(x[j]) - m)));
    }
    const C inv = C(1.0 / sum);
    for (int64_t j = 0; j < seen; ++j) x[j] *= inv;
    for (int64_t j = seen; j < S; ++j) x[j] = C(0);
    lse[row] = C(m + std::log(sum));
  }
}

template <typename C>
void attention_probs_tile(C* s, const C* lse, int64_t N, int64_t rows, int64_t S, int64_t r0, bool causal,
                          double scale) {
  const int64_t total = N * rows;
#pragma omp parallel for if (total >= kParallelRows)
  for (int64_t row = 0; row < total; ++row) {
    C* x = s + row * S;
    const int64_t i = row % rows, seen = visible(S, r0, i, causal);
    const double l = double(lse[row]);
    if constexpr (std::is_same_v<C, float>) {
      scaled_exp(x, seen, float(scale), float(l));
    } else {
      for (int64_t j = 0; j < seen; ++j) x[j] = C(std::exp(scale * double(x[j]) - l));
    }
    for (int64_t j = seen; j < S; ++j) x[j] = C(0);
  }
}

template <typename C>
void attention_dscores_tile(const C* p, C* dp, const C* delta, int64_t N, int64_t rows, int64_t S, double scale) {
  const int64_t total = N * rows;
#pragma omp parallel for if (total >= kParallelRows)
  for (int64_t row = 0; row < total; ++row) {
    const C* pr = p + row * S;
    C* g = dp + row * S;
    const C d = delta[row], sc = C(scale);
    for (int64_t j = 0; j < S; ++j) g[j] = sc * pr[j] * (g[j] - d);
  }
}




// Rows r0 .. r0+rows-1 of every head of x [N, S, D] (contiguous), as a new [N, rows, D].
Tensor rows_of(const Tensor& x, int64_t r0, int64_t rows) {
  const int64_t N = x.size(0), S = x.size(1), D = x.size(2);
  const size_t e = dtype_size(x.dtype());
  Tensor out = Tensor::empty({N, rows, D}, x.dtype());
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(dst + size_t(n * rows * D) * e, src + size_t((n * S + r0) * D) * e, size_t(rows * D) * e);
  return out;
}

// dst rows r0 .. of every head := tile [N, rows, D] (same dtype).
void put_rows(Tensor& dst, const Tensor& tile, int64_t r0) {
  const int64_t N = dst.size(0), S = dst.size(1), D = dst.size(2), rows = tile.size(1);
  const size_t e = dtype_size(dst.dtype());
  const char* src = static_cast<const char*>(tile.data());
  char* out = static_cast<char*>(dst.data());
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(out + size_t((n * S + r0) * D) * e, src + size_t(n * rows * D) * e, size_t(rows * D) * e);
}

// acc += x (both contiguous, acc in the statistics dtype C).
template <typename C>
void accumulate(Tensor& acc, const Tensor& x) {
  const Tensor c = x.dtype() == acc.dtype() ? x : x.to(acc.dtype());
  C* a = acc.data_ptr<C>();
  const C* v = c.data_ptr<C>();
  const int64_t n = acc.numel();
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) a[i] += v[i];
}

template <typename C>
Tensor sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, int64_t block,
                    Tensor& lse, const AttentionMatmul& mm) {
  const int64_t N = q.size(0), S = q.size(1), Dv = v.size(2);
  const DType cdt = std::is_same_v<C, double> ? DType::f64 : DType::f32;
  Tensor out = Tensor::empty({N, S, Dv}, v.dtype());
  lse = Tensor::empty({N, S}, cdt);
  for (int64_t r0 = 0; r0 < S; r0 += block) {
    const int64_t rows = std::min(block, S - r0);
    Tensor p = mm(rows_of(q, r0, rows), k, false, true).to(cdt);  // [N, rows, S]
    Tensor tile_lse = Tensor::empty({N, rows}, cdt);
    attention_softmax_tile<C>(p.data_ptr<C>(), tile_lse.data_ptr<C>(), N, rows, S, r0, causal, scale);
    put_rows(out, mm(p.to(v.dtype()), v, false, false), r0);
    C* l = lse.data_ptr<C>();
    const C* t = tile_lse.data_ptr<C>();
    for (int64_t n = 0; n < N; ++n) std::copy(t + n * rows, t + (n + 1) * rows, l + n * S + r0);
  }
  return out;
}

template <typename C>
std::vector<Tensor> sdpa_backward(const AttentionTiles& s, const Tensor& d_out, const AttentionMatmul& mm) {
  const Tensor &q = s.q, &k = s.k, &v = s.v;
  const int64_t N = q.size(0), S = q.size(1), D = q.size(2), Dv = v.size(2);
  const DType cdt = std::is_same_v<C, double> ? DType::f64 : DType::f32;
  const Tensor dout = (d_out.dtype() == v.dtype() ? d_out : d_out.to(v.dtype())).contiguous();
  // delta[row] = sum_d dO * O: the row's sum of p * dp, without the tile.
  Tensor delta = Tensor::empty({N, S}, cdt);
  {
    const Tensor a = dout.to(cdt), b = s.out.to(cdt);
    const C *x = a.data_ptr<C>(), *y = b.data_ptr<C>();
    C* d = delta.data_ptr<C>();
#pragma omp parallel for if (N * S > 64)
    for (int64_t r = 0; r < N * S; ++r) {
      double acc = 0.0;
      for (int64_t j = 0; j < Dv; ++j) acc += double(x[r * Dv + j]) * double(y[r * Dv + j]);
      d[r] = C(acc);
    }
  }
  Tensor dq = Tensor::empty({N, S, D}, q.dtype());
  Tensor dk = Tensor::zeros({N, S, D}, cdt), dv = Tensor::zeros({N, S, Dv}, cdt);
  for (int64_t r0 = 0; r0 < S; r0 += s.block) {
    const int64_t rows = std::min(s.block, S - r0);
    const Tensor qt = rows_of(q, r0, rows), dot = rows_of(dout, r0, rows);
    Tensor p = mm(qt, k, false, true).to(cdt);  // the tile's scores again: [N, rows, S]
    const Tensor lse_t = rows_of(s.lse.reshape({N, S, 1}), r0, rows);
    attention_probs_tile<C>(p.data_ptr<C>(), lse_t.data_ptr<C>(), N, rows, S, r0, s.causal, s.scale);
    accumulate<C>(dv, mm(p.to(v.dtype()), dot, true, false));  // dV += P^T dO
    Tensor dp = mm(dot, v, false, true).to(cdt);                // dP = dO V^T
    const Tensor delta_t = rows_of(delta.reshape({N, S, 1}), r0, rows);
    attention_dscores_tile<C>(p.data_ptr<C>(), dp.data_ptr<C>(), delta_t.data_ptr<C>(), N, rows, S, s.scale);
    const Tensor ds = dp.to(q.dtype());
    put_rows(dq, mm(ds, k, false, false), r0);  // dQ = dS K
    accumulate<C>(dk, mm(ds, qt, true, false));  // dK += dS^T Q
  }
  return {dq, dk.to(k.dtype()), dv.to(v.dtype())};
}


}  // namespace

void attention_tiles_forward(AttentionTiles& t, const AttentionMatmul& mm) {
  t.out = t.q.dtype() == DType::f64 ? sdpa_forward<double>(t.q, t.k, t.v, t.causal, t.scale, t.block, t.lse, mm)
                                    : sdpa_forward<float>(t.q, t.k, t.v, t.causal, t.scale, t.block, t.lse, mm);
}

std::vector<Tensor> attention_tiles_backward(const AttentionTiles& t, const Tensor& d_out, const AttentionMatmul& mm) {
  return t.q.dtype() == DType::f64 ? sdpa_backward<double>(t, d_out, mm) : sdpa_backward<float>(t, d_out, mm);
}

}  // namespace mixprec::backend::cpu
