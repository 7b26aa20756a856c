// backend/cpu/loss.cpp: see loss.h.
#include "backend/cpu/loss.h"
#include "backend/cpu/tail_mask.h"

#include <cmath>
#include <limits>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/vector_exp.h"

namespace mixprec::backend::cpu {

namespace {
constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements; below this a fork costs more

// Per-thread rows, reused: a language model's logits are [tokens, 256], and copying them
// whole to a vector of doubles (8 MB for 4096 tokens) cost a fresh mapping and its page
// faults on every step.
std::vector<double>& row_buffer() {
  static thread_local std::vector<double> b;
  return b;
}
std::vector<double>& gradient_buffer() {
  static thread_local std::vector<double> b;
  return b;
}

// Row i of the contiguous [N, C] x as doubles (x's own memory when it is f64).
const double* row_as_f64(const Tensor& x, int64_t i, std::vector<double>& buf) {
  const int64_t C = x.size(1);
  const char* p = static_cast<const char*>(x.data()) + i * C * int64_t(dtype_size(x.dtype()));
  if (x.dtype() == DType::f64) return reinterpret_cast<const double*>(p);
  buf.resize(size_t(C));
  convert_elements(p, x.dtype(), buf.data(), DType::f64, C);  // exact
  return buf.data();
}

// The row loops in float64. With AVX-512 the exps go 8 at a time (exp_f64_avx512, ~1 ulp of
// double; the scalar loop's std::exp is ~0.5 ulp): the results are rounded once to f32 or
// the logits' dtype, where the two agree except on a rare tie. The AVX-512 sum adds 8
// partial sums at the end, in a fixed order (deterministic for a given CPU kind).
double row_max(const double* row, int64_t C) {  // a NaN makes the whole row NaN
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < C; ++j)
    if (row[j] > m || std::isnan(row[j])) m = row[j];
  return m;
}

__attribute__((target("avx512f"))) double sum_exp_avx512(const double* row, int64_t C, double m) {
  __m512d acc = _mm512_setzero_pd();
  const __m512d mv = _mm512_set1_pd(m);
  for (int64_t j = 0; j < C; j += 8) {
    const __mmask8 k = lanes8(j, C);
    const __m512d e = exp_f64_avx512(_mm512_sub_pd(_mm512_maskz_loadu_pd(k, row + j), mv));
    acc = _mm512_mask_add_pd(acc, k, acc, e);
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, acc);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

double sum_exp(const double* row, int64_t C, double m) {
  if (cpu_features().avx512f) return sum_exp_avx512(row, C, m);
  double s = 0;
  for (int64_t j = 0; j < C; ++j) s += std::exp(row[j] - m);
  return s;
}

// g[j] = (exp(row[j] - lse) - [j == target]) * scale, scale = the row's gradient (/ N for
// a mean), so one multiply per element.
__attribute__((target("avx512f"))) void gradient_row_avx512(const double* row, int64_t C, double lse, double scale,
                                                             int64_t target, double* g) {
  const __m512d lv = _mm512_set1_pd(lse), sv = _mm512_set1_pd(scale);
  for (int64_t j = 0; j < C; j += 8) {
    const __mmask8 k = lanes8(j, C);
    __m512d p = exp_f64_avx512(_mm512_sub_pd(_mm512_maskz_loadu_pd(k, row + j), lv));
    if (target >= j && target < j + 8)
      p = _mm512_mask_sub_pd(p, __mmask8(1u << (target - j)), p, _mm512_set1_pd(1.0));
    _mm512_mask_storeu_pd(g + j, k, _mm512_mul_pd(p, sv));
  }
}

void gradient_row(const double* row, int64_t C, double lse, double scale, int64_t target, double* g) {
  if (cpu_features().avx512f) return gradient_row_avx512(row, C, lse, scale, target, g);
  for (int64_t j = 0; j < C; ++j) {
    const double p = std::exp(row[j] - lse);
    g[j] = (j == target ? p - 1.0 : p) * scale;
  }
}
}  // namespace

std::vector<double> nll_rows(const Tensor& lp, const std::vector<int64_t>& t) {
  const int64_t N = lp.size(0), C = lp.size(1);
  Tensor lpc = lp.contiguous().detach();
  std::vector<double> picked(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) picked[size_t(i)] = -lpc.at(i * C + t[size_t(i)]);
  return picked;
}

Tensor nll_backward(const std::vector<double>& gd, bool per_row, bool mean,
                    const std::vector<int64_t>& t, int64_t N, int64_t C, DType dt) {
  std::vector<double> g(size_t(N * C), 0.0);
  for (int64_t i = 0; i < N; ++i) {
    const double gi = per_row ? gd[size_t(i)] : gd[0];
    g[size_t(i * C + t[size_t(i)])] = -gi / (mean ? double(N) : 1.0);
  }
  return Tensor::from_vector_f64(g, {N, C}, dt);
}

std::vector<double> cross_entropy_rows(const Tensor& x, const std::vector<int64_t>& t,
                                       std::vector<double>& lse) {
  const int64_t N = x.size(0), C = x.size(1);
  lse.assign(size_t(N), 0.0);
  std::vector<double> rows(static_cast<size_t>(N));
#pragma omp parallel for if (N * C > kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const double* row = row_as_f64(x, i, row_buffer());
    const double m = row_max(row, C);
    lse[size_t(i)] = m + std::log(sum_exp(row, C, m));
    rows[size_t(i)] = lse[size_t(i)] - row[t[size_t(i)]];
  }
  return rows;
}

Tensor cross_entropy_backward(const Tensor& x, const std::vector<double>& gd, bool per_row,
                              bool mean, const std::vector<int64_t>& t,
                              const std::vector<double>& lse) {
  const int64_t N = x.size(0), C = x.size(1);
  Tensor out = Tensor::empty({N, C}, x.dtype());
  char* out_base = static_cast<char*>(out.data());
  const int64_t out_row_bytes = C * int64_t(dtype_size(x.dtype()));
#pragma omp parallel for if (N * C > kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const double* row = row_as_f64(x, i, row_buffer());
    std::vector<double>& g = gradient_buffer();
    g.resize(size_t(C));
    const double gi = per_row ? gd[size_t(i)] : gd[0];
    gradient_row(row, C, lse[size_t(i)], mean ? gi / double(N) : gi, t[size_t(i)], g.data());
    convert_elements(g.data(), DType::f64, out_base + i * out_row_bytes, x.dtype(), C);  // rounded once
  }
  return out;
}

Tensor argmax_rows(const Tensor& src) {
  const int64_t N = src.size(0), C = src.size(1);
  const std::vector<float> v = src.to_vector();
  Tensor out = Tensor::empty({N}, DType::i64);
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (v[size_t(i * C + c)] > v[size_t(i * C + best)]) best = c;
    o[i] = best;
  }
  return out;
}

}  // namespace mixprec::backend::cpu
