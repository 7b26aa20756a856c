// backend/cpu/loss.cpp: see loss.h.
#include "backend/cpu/loss.h"

#include <cmath>
#include <limits>

namespace mixprec::backend::cpu {

namespace {
constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements; below this a fork costs more
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
  const std::vector<double> xv = x.to_vector_f64();
  lse.assign(size_t(N), 0.0);
  std::vector<double> rows(static_cast<size_t>(N));
#pragma omp parallel for if (N * C > kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const double* row = &xv[size_t(i * C)];
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < C; ++j)
      if (row[j] > m || std::isnan(row[j])) m = row[j];  // a NaN makes the whole row NaN
    double s = 0;
    for (int64_t j = 0; j < C; ++j) s += std::exp(row[j] - m);
    lse[size_t(i)] = m + std::log(s);
    rows[size_t(i)] = lse[size_t(i)] - row[t[size_t(i)]];
  }
  return rows;
}

Tensor cross_entropy_backward(const Tensor& x, const std::vector<double>& gd, bool per_row,
                              bool mean, const std::vector<int64_t>& t,
                              const std::vector<double>& lse) {
  const int64_t N = x.size(0), C = x.size(1);
  const std::vector<double> xv = x.to_vector_f64();
  std::vector<double> g(size_t(N * C));
#pragma omp parallel for if (N * C > kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const double gi = per_row ? gd[size_t(i)] : gd[0];
    for (int64_t j = 0; j < C; ++j) {
      const double p = std::exp(xv[size_t(i * C + j)] - lse[size_t(i)]);
      const double d = gi * (j == t[size_t(i)] ? p - 1.0 : p);
      g[size_t(i * C + j)] = mean ? d / double(N) : d;
    }
  }
  return Tensor::from_vector_f64(g, {N, C}, x.dtype());
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
