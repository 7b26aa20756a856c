// layer_norm_rows.cpp: see layer_norm_rows.h. Each kernel body is written once
// (always_inline) and instantiated twice: for AVX-512 and for the baseline ISA; the
// choice is made once per process from the CPU's features.
#include "backend/cpu/layer_norm_rows.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>

#include <cmath>

#include "core/convert.h"
#include "core/convert_simd.h"
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


// The f32, bf16 and f16 rows (f32: every layer_norm under autocast, its policy row is fp32;
// bf16/f16: the residual stream under O2), written out with AVX-512: a row is read as floats
// (a 16-bit row widened once into a row buffer by convert's vector kernel, exact) and widened
// to doubles 8 at a time in registers; three passes forward (the mean, the squared
// deviations, the output), two backward (the row sums, then dx and the weight/bias shares
// together), all over a row that stays in L1. The same arithmetic in double for every
// storage type, with 8-lane partial sums added in a fixed order; outputs rounded once from
// double to the row's type (16-bit: round-to-odd to f32 in registers, then nearest even by
// convert_elements: the bits convert_elements gives from double). Needs AVX-512 F and VL
// (the round-to-odd step's 256-bit masked OR; every AVX-512 CPU but Xeon Phi has both).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define MIXPREC_LN_AVX512 __attribute__((target("avx512f,avx512vl")))

// a * b where the product feeds an add or subtract: GCC contracts _mm512_mul_pd (a plain
// vector multiply) with a following add into an FMA, which changes the bits and turns exact
// zeros (a one-value row's dx: g - mean(g)) into rounding residue. The rounding-mode form is
// a builtin the contraction does not see; _MM_FROUND_CUR_DIRECTION makes it the same vmulpd.
MIXPREC_LN_AVX512 inline __m512d mul_unfused(__m512d a, __m512d b) {
  return _mm512_mul_round_pd(a, b, _MM_FROUND_CUR_DIRECTION);
}

MIXPREC_LN_AVX512 inline double lanes_sum(__m512d v) {
  alignas(64) double l[8];
  _mm512_store_pd(l, v);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// Values j .. j+7 of an f32 row as doubles (lanes past d read as 0).
MIXPREC_LN_AVX512 inline __m512d load8(const float* row, int64_t j, int64_t d) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(__mmask16(lanes8(j, d)), row + j)));
}

// How 8 doubles are narrowed into dst[j ..] (the lanes of k only): F32Out rounds to nearest
// (an f32 row's one rounding); RoundToOddOut rounds to odd, the step before a 16-bit row's
// one rounding (convert_elements then rounds the f32 row to bf16/f16 with its vector kernels,
// VCVTNE2PS2BF16 32 values at a time: cheaper than rounding 8 at a time in the loop).
struct F32Out {
  MIXPREC_LN_AVX512 static void store8(float* dst, int64_t j, __mmask8 k, __m512d v) {
    _mm512_mask_storeu_ps(dst + j, __mmask16(k), _mm512_castps256_ps512(_mm512_cvtpd_ps(v)));
  }
};
struct RoundToOddOut {
  MIXPREC_LN_AVX512 static void store8(float* dst, int64_t j, __mmask8 k, __m512d v) {
    _mm512_mask_storeu_ps(dst + j, __mmask16(k), _mm512_castps256_ps512(simd::f64x8_to_f32_round_to_odd(v)));
  }
};

template <class Out>
MIXPREC_LN_AVX512 void forward_rows_avx512(const float* x, int64_t d, const double* w, const double* b, double eps, float* y,
                                           double& mean_out, double& rstd_out) {
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    s0 = _mm512_add_pd(s0, load8(x, j, d));
    s1 = _mm512_add_pd(s1, load8(x, j + 8, d));
  }
  for (; j < d; j += 8) s0 = _mm512_add_pd(s0, load8(x, j, d));
  const double mean = lanes_sum(_mm512_add_pd(s0, s1)) / double(d);
  const __m512d mv = _mm512_set1_pd(mean);
  __m512d q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd();
  for (j = 0; j + 16 <= d; j += 16) {
    const __m512d a = _mm512_sub_pd(load8(x, j, d), mv), c = _mm512_sub_pd(load8(x, j + 8, d), mv);
    q0 = _mm512_fmadd_pd(a, a, q0);
    q1 = _mm512_fmadd_pd(c, c, q1);
  }
  for (; j < d; j += 8) {  // lanes past d: (0 - mean)^2 must not count
    const __m512d a = _mm512_maskz_sub_pd(lanes8(j, d), load8(x, j, d), mv);
    q0 = _mm512_fmadd_pd(a, a, q0);
  }
  const double rstd = 1.0 / std::sqrt(lanes_sum(_mm512_add_pd(q0, q1)) / double(d) + eps);
  const __m512d rv = _mm512_set1_pd(rstd);
  for (j = 0; j < d; j += 8) {
    const __mmask8 k = lanes8(j, d);
    const __m512d xhat = _mm512_mul_pd(_mm512_sub_pd(load8(x, j, d), mv), rv);
    const __m512d out = _mm512_fmadd_pd(xhat, _mm512_maskz_loadu_pd(k, w + j), _mm512_maskz_loadu_pd(k, b + j));
    Out::store8(y, j, k, out);
  }
  mean_out = mean;
  rstd_out = rstd;
}

template <class Out>
MIXPREC_LN_AVX512 void backward_rows_avx512(const float* x, const float* dy, int64_t d, const double* w, double mean,
                                            double rstd, float* dx, double* dw_acc, double* db_acc) {
  const __m512d mv = _mm512_set1_pd(mean), rv = _mm512_set1_pd(rstd);
  __m512d mg = _mm512_setzero_pd(), mgx = _mm512_setzero_pd();
  if (dx != nullptr) {
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w: the two means first.
    __m512d sg = _mm512_setzero_pd(), sgx = _mm512_setzero_pd();
    for (int64_t j = 0; j < d; j += 8) {
      const __m512d g = mul_unfused(load8(dy, j, d), _mm512_maskz_loadu_pd(lanes8(j, d), w + j));
      sg = _mm512_add_pd(sg, g);
      sgx = _mm512_fmadd_pd(g, _mm512_mul_pd(_mm512_sub_pd(load8(x, j, d), mv), rv), sgx);
    }
    mg = _mm512_set1_pd(lanes_sum(sg) / double(d));
    mgx = _mm512_set1_pd(lanes_sum(sgx) / double(d));
  }
  // One pass for dx and the weight/bias shares: each reads dy and xhat once.
  for (int64_t j = 0; j < d; j += 8) {
    const __mmask8 k = lanes8(j, d);
    const __m512d g0 = load8(dy, j, d);
    const __m512d xhat = _mm512_mul_pd(_mm512_sub_pd(load8(x, j, d), mv), rv);
    if (dx != nullptr) {
      const __m512d g = mul_unfused(g0, _mm512_maskz_loadu_pd(k, w + j));
      Out::store8(dx, j, k, _mm512_mul_pd(rv, _mm512_sub_pd(_mm512_sub_pd(g, mg), mul_unfused(xhat, mgx))));
    }
    if (dw_acc != nullptr)
      _mm512_mask_storeu_pd(dw_acc + j, k, _mm512_fmadd_pd(g0, xhat, _mm512_maskz_loadu_pd(k, dw_acc + j)));
    if (db_acc != nullptr)
      _mm512_mask_storeu_pd(db_acc + j, k, _mm512_add_pd(_mm512_maskz_loadu_pd(k, db_acc + j), g0));
  }
}
#undef MIXPREC_LN_AVX512
#pragma GCC diagnostic pop

// Row r of a dense f32/bf16/f16 buffer as f32: the row itself, or (16-bit) widened into buf
// by convert's vector kernel, once, so the kernels' passes read floats.
const float* f32_row(const void* base, DType dt, int64_t r, int64_t d, std::vector<float>& buf) {
  if (dt == DType::f32) return static_cast<const float*>(base) + r * d;
  buf.resize(size_t(d));
  convert_elements(static_cast<const uint16_t*>(base) + r * d, dt, buf.data(), DType::f32, d);
  return buf.data();
}

// The kernels on row r of dense buffers of dtype dt (f32, bf16 or f16): an f32 output row is
// written in place; a 16-bit one goes through s.fo (round-to-odd f32), then one rounding.
void forward_rows_at(const void* x, DType dt, int64_t r, int64_t d, const double* w, const double* b, double eps,
                     void* y, double& mean, double& rstd, Scratch& s) {
  const float* xr = f32_row(x, dt, r, d, s.f);
  if (dt == DType::f32)
    return forward_rows_avx512<F32Out>(xr, d, w, b, eps, static_cast<float*>(y) + r * d, mean, rstd);
  s.fo.resize(size_t(d));
  forward_rows_avx512<RoundToOddOut>(xr, d, w, b, eps, s.fo.data(), mean, rstd);
  convert_elements(s.fo.data(), DType::f32, static_cast<uint16_t*>(y) + r * d, dt, d);
}

void backward_rows_at(const void* x, const void* dy, DType dt, int64_t r, int64_t d, const double* w, double mean,
                      double rstd, void* dx, double* dw_acc, double* db_acc, Scratch& s) {
  // x was written by the forward long before and dy by the layer above: both come from
  // memory, not cache. Ask for the rows two ahead (this thread's next rows) while these run.
  const int64_t row_bytes = d * int64_t(dtype_size(dt));
  const char* xa = static_cast<const char*>(x) + (r + 2) * row_bytes;
  const char* ga = static_cast<const char*>(dy) + (r + 2) * row_bytes;
  for (int64_t j = 0; j < row_bytes; j += 64) {
    _mm_prefetch(xa + j, _MM_HINT_T0);
    _mm_prefetch(ga + j, _MM_HINT_T0);
  }
  const float* xr = f32_row(x, dt, r, d, s.f);
  const float* gr = f32_row(dy, dt, r, d, s.fg);
  if (dt == DType::f32 || dx == nullptr)
    return backward_rows_avx512<F32Out>(xr, gr, d, w, mean, rstd, dx ? static_cast<float*>(dx) + r * d : nullptr,
                                        dw_acc, db_acc);
  s.fo.resize(size_t(d));
  backward_rows_avx512<RoundToOddOut>(xr, gr, d, w, mean, rstd, s.fo.data(), dw_acc, db_acc);
  convert_elements(s.fo.data(), DType::f32, static_cast<uint16_t*>(dx) + r * d, dt, d);
}

bool rows_avx512() {
  const CpuFeatures& c = cpu_features();
  return c.avx512f && c.avx512vl;
}

}  // namespace

void forward_row(const void* x_base, DType dt, int64_t r, int64_t d, const double* w,
                 const double* b, double eps, void* y_base, double& mean, double& rstd,
                 Scratch& s) {
  if ((dt == DType::f32 || dt == DType::bf16 || dt == DType::f16) && rows_avx512())
    return forward_rows_at(x_base, dt, r, d, w, b, eps, y_base, mean, rstd, s);
  (cpu_features().avx512f ? forward_avx512 : forward_baseline)(x_base, dt, r, d, w, b, eps, y_base, mean,
                                                     rstd, s);
}

void backward_row(const void* x_base, DType dt, const void* dy_base, DType gdt, int64_t r,
                  int64_t d, const double* w, double mean, double rstd, void* dx_base,
                  double* dw_acc, double* db_acc, Scratch& s) {
  if (dt == gdt && (dt == DType::f32 || dt == DType::bf16 || dt == DType::f16) && rows_avx512())
    return backward_rows_at(x_base, dy_base, dt, r, d, w, mean, rstd, dx_base, dw_acc, db_acc, s);
  (cpu_features().avx512f ? backward_avx512 : backward_baseline)(x_base, dt, dy_base, gdt, r, d, w, mean,
                                                       rstd, dx_base, dw_acc, db_acc, s);
}

void forward_row_baseline(const void* x_base, DType dt, int64_t r, int64_t d, const double* w,
                          const double* b, double eps, void* y_base, double& mean, double& rstd,
                          Scratch& s) {
  forward_baseline(x_base, dt, r, d, w, b, eps, y_base, mean, rstd, s);
}

void backward_row_baseline(const void* x_base, DType dt, const void* dy_base, DType gdt, int64_t r,
                           int64_t d, const double* w, double mean, double rstd, void* dx_base,
                           double* dw_acc, double* db_acc, Scratch& s) {
  backward_baseline(x_base, dt, dy_base, gdt, r, d, w, mean, rstd, dx_base, dw_acc, db_acc, s);
}

}  // namespace mixprec::backend::cpu::layer_norm_rows
