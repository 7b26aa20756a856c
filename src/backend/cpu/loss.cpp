// backend/cpu/loss.cpp: see loss.h.
#include "backend/cpu/loss.h"

#include <cmath>
#include <limits>

#include "core/convert.h"

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
  Tensor out = Tensor::empty({N, C}, x.dtype());
  char* out_base = static_cast<char*>(out.data());
  const int64_t out_row_bytes = C * int64_t(dtype_size(x.dtype()));
#pragma omp parallel for if (N * C > kParallelMin)
  for (int64_t i = 0; i < N; ++i) {
    const double* row = row_as_f64(x, i, row_buffer());
    std::vector<double>& g = gradient_buffer();
    g.resize(size_t(C));
    const double gi = per_row ? gd[size_t(i)] : gd[0];
    for (int64_t j = 0; j < C; ++j) {
      const double p = std::exp(row[j] - lse[size_t(i)]);
      const double d = gi * (j == t[size_t(i)] ? p - 1.0 : p);
      g[size_t(j)] = mean ? d / double(N) : d;
    }
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
