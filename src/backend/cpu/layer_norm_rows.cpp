// layer_norm_rows.cpp: see layer_norm_rows.h. Each kernel body is written once
// (always_inline) and instantiated twice: for AVX-512 and for the baseline ISA; the
// choice is made once per process from the CPU's features.
#include "backend/cpu/layer_norm_rows.h"

#include <cmath>

#include "core/convert.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu::layer_norm_rows {
namespace {

// Row r as doubles (f64: the row itself). bf16/f16 go through the vectorised f32 conversion
// first (exact), then widen.
MIXPREC_ALWAYS_INLINE const double* load_row(const void* base, DType dtype, int64_t r, int64_t d,
                                      std::vector<float>& fbuf, std::vector<double>& buf) {
  const char* row = static_cast<const char*>(base) + r * d * int64_t(dtype_size(dtype));
  if (dtype == DType::f64) return reinterpret_cast<const double*>(row);
  const float* f = reinterpret_cast<const float*>(row);
  if (dtype != DType::f32) {
    fbuf.resize(size_t(d));
    convert_elements(row, dtype, fbuf.data(), DType::f32, d);
    f = fbuf.data();
  }
  buf.resize(size_t(d));
  double* out = buf.data();
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) out[j] = double(f[j]);
  return out;
}

// Rounds once from double to dtype.
MIXPREC_ALWAYS_INLINE void store_row(const double* v, void* base, DType dtype, int64_t r, int64_t d) {
  char* row = static_cast<char*>(base) + r * d * int64_t(dtype_size(dtype));
  if (dtype == DType::f32) {
    float* f = reinterpret_cast<float*>(row);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) f[j] = float(v[j]);
  } else {
    convert_elements(v, DType::f64, row, dtype, d);
  }
}

MIXPREC_ALWAYS_INLINE void forward_body(const void* x_base, DType dt, int64_t r, int64_t d,
                                 const double* w, const double* b, double eps, void* y_base,
                                 double& mean_out, double& rstd_out, Scratch& s) {
  const double* x = load_row(x_base, dt, r, d, s.f, s.x);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < d; ++j) sum += x[j];
  const double mean = sum / double(d);
  double ss = 0.0;  // two passes: no cancellation when |mean| >> std
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < d; ++j) ss += (x[j] - mean) * (x[j] - mean);
  const double rstd = 1.0 / std::sqrt(ss / double(d) + eps);
  s.out.resize(size_t(d));
  double* y = s.out.data();
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - mean) * rstd * w[j] + b[j];
  store_row(y, y_base, dt, r, d);
  mean_out = mean;
  rstd_out = rstd;
}

MIXPREC_ALWAYS_INLINE void backward_body(const void* x_base, DType dt, const void* dy_base, DType gdt,
                                  int64_t r, int64_t d, const double* w, double mean,
                                  double rstd, void* dx_base, double* dw_acc, double* db_acc,
                                  Scratch& s) {
  const double* x = load_row(x_base, dt, r, d, s.f, s.x);
  const double* dy = load_row(dy_base, gdt, r, d, s.f, s.g);
  if (dx_base != nullptr) {
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
    double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < d; ++j) {
      const double gj = dy[j] * w[j];
      sg += gj;
      sgx += gj * (x[j] - mean) * rstd;
    }
    const double mg = sg / double(d), mgx = sgx / double(d);
    s.out.resize(size_t(d));
    double* dx = s.out.data();
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dx[j] = rstd * (dy[j] * w[j] - mg - (x[j] - mean) * rstd * mgx);
    store_row(dx, dx_base, dt, r, d);
  }
  if (dw_acc != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dw_acc[j] += dy[j] * (x[j] - mean) * rstd;
  }
  if (db_acc != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) db_acc[j] += dy[j];
  }
}

__attribute__((target("avx512f"))) void forward_avx512(const void* x, DType dt, int64_t r,
                                                        int64_t d, const double* w, const double* b,
                                                        double eps, void* y, double& mean,
                                                        double& rstd, Scratch& s) {
  forward_body(x, dt, r, d, w, b, eps, y, mean, rstd, s);
}
void forward_baseline(const void* x, DType dt, int64_t r, int64_t d, const double* w,
                      const double* b, double eps, void* y, double& mean, double& rstd,
                      Scratch& s) {
  forward_body(x, dt, r, d, w, b, eps, y, mean, rstd, s);
}

__attribute__((target("avx512f"))) void backward_avx512(const void* x, DType dt, const void* dy,
                                                         DType gdt, int64_t r, int64_t d,
                                                         const double* w, double mean, double rstd,
                                                         void* dx, double* dw, double* db,
                                                         Scratch& s) {
  backward_body(x, dt, dy, gdt, r, d, w, mean, rstd, dx, dw, db, s);
}
void backward_baseline(const void* x, DType dt, const void* dy, DType gdt, int64_t r, int64_t d,
                       const double* w, double mean, double rstd, void* dx, double* dw,
                       double* db, Scratch& s) {
  backward_body(x, dt, dy, gdt, r, d, w, mean, rstd, dx, dw, db, s);
}

}  // namespace

void forward_row(const void* x_base, DType dt, int64_t r, int64_t d, const double* w,
                 const double* b, double eps, void* y_base, double& mean, double& rstd,
                 Scratch& s) {
  (cpu_features().avx512f ? forward_avx512 : forward_baseline)(x_base, dt, r, d, w, b, eps, y_base, mean,
                                                     rstd, s);
}

void backward_row(const void* x_base, DType dt, const void* dy_base, DType gdt, int64_t r,
                  int64_t d, const double* w, double mean, double rstd, void* dx_base,
                  double* dw_acc, double* db_acc, Scratch& s) {
  (cpu_features().avx512f ? backward_avx512 : backward_baseline)(x_base, dt, dy_base, gdt, r, d, w, mean,
                                                       rstd, dx_base, dw_acc, db_acc, s);
}

}  // namespace mixprec::backend::cpu::layer_norm_rows
