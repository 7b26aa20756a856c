// layer_norm_rows_test.cpp: layer_norm forward and backward at transformer-like sizes (the
// threaded, vectorised row kernels of ops/layer_norm_rows.h) against naive float64 loops
// written here, for f32 and bf16 storage; and bit-identical results for 1 and 2 threads
// of the forward (each row is one thread's work).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

struct Naive {
  std::vector<double> y, dx, dw, db;
};

// y = (x - mean) / sqrt(var + eps) * w + b per row; gradients of sum(y * g).
Naive naive_layer_norm(const std::vector<double>& x, const std::vector<double>& w,
                       const std::vector<double>& b, const std::vector<double>& g, int64_t rows,
                       int64_t d, double eps) {
  Naive n{std::vector<double>(x.size()), std::vector<double>(x.size()),
          std::vector<double>(size_t(d)), std::vector<double>(size_t(d))};
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[size_t(r * d)];
    const double* gr = &g[size_t(r * d)];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += xr[j] / double(d);
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean) / double(d);
    const double rstd = 1.0 / std::sqrt(var + eps);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - mean) * rstd;
      n.y[size_t(r * d + j)] = xhat * w[size_t(j)] + b[size_t(j)];
      mg += gr[j] * w[size_t(j)] / double(d);
      mgx += gr[j] * w[size_t(j)] * xhat / double(d);
      n.dw[size_t(j)] += gr[j] * xhat;
      n.db[size_t(j)] += gr[j];
    }
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - mean) * rstd;
      n.dx[size_t(r * d + j)] = rstd * (gr[j] * w[size_t(j)] - mg - xhat * mgx);
    }
  }
  return n;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  double atol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " element " << i;
}

void check(DType dt, int64_t rows, int64_t d) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " [" + std::to_string(rows) + ", " + std::to_string(d) + "]");
  // An offset mean (3) checks the two-pass variance; values are exact in dt.
  Tensor x = add(Tensor::uniform({rows, d}, -2, 2), Tensor::full({1}, 3.0)).to(dt).detach()
                 .requires_grad_(true);
  Tensor w = Tensor::uniform({d}, 0.5, 1.5).requires_grad_(true);
  Tensor b = Tensor::uniform({d}, -1, 1).requires_grad_(true);
  const Tensor g = Tensor::uniform({rows, d}, -1, 1).to(dt);
  Tensor y = layer_norm(x, {d}, w, b, 1e-5);
  ASSERT_EQ(y.dtype(), dt);
  sum(mul(y, g)).backward();
  const Naive n = naive_layer_norm(x.to_vector_f64(), w.to_vector_f64(), b.to_vector_f64(),
                                   g.to_vector_f64(), rows, d, 1e-5);
  // Outputs are rounded once to dt (f32: 2^-24 relative; bf16: 2^-9) from double; an
  // absolute floor covers values near 0. dw/db are f32 sums over rows of rounded-once
  // products: f32 relative rounding plus row-count-scaled slack for the upstream rounding.
  const double r = dt == DType::bf16 ? 0x1p-8 : 0x1p-22;
  expect_close(y.to_vector_f64(), n.y, r, r, "y");
  expect_close(x.grad().to_vector_f64(), n.dx, r, r * 4, "dx");
  expect_close(w.grad().to_vector_f64(), n.dw, 1e-6, 1e-6 * double(rows), "dw");
  expect_close(b.grad().to_vector_f64(), n.db, 1e-6, 1e-6 * double(rows), "db");
}

TEST(LayerNormRows, MatchesNaiveFloat64) {
  check(DType::f32, 300, 256);  // threaded (above 2^15 elements)
  check(DType::bf16, 300, 256);
  check(DType::f32, 7, 37);     // serial, d not a multiple of the vector width
  check(DType::bf16, 5, 3);
  check(DType::f32, 4, 3);      // the f32 AVX-512 kernel: a row shorter than one vector,
  check(DType::f32, 9, 24);     // one 16-value step and an 8-value tail
}

TEST(LayerNormRows, ForwardSameBitsForOneAndTwoThreads) {
  const Tensor x = Tensor::uniform({257, 128}, -3, 3);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<double> one = layer_norm(x, {128}).to_vector_f64();
  omp_set_num_threads(std::max(2, saved));
  const std::vector<double> two = layer_norm(x, {128}).to_vector_f64();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

}  // namespace
}  // namespace mixprec
