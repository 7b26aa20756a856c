// backend/cpu/residual_layer_norm.cpp: see residual_layer_norm.h. Row by row on the OpenMP
// threads (static schedule: the weight/bias shares are summed per thread in a fixed order);
// each row's add, norm and conversions run on the row while it sits in L1, the norm itself
// on layer_norm_rows (AVX-512 for f32, bf16 and f16 rows where the CPU has it, else the
// baseline bodies).
#include "backend/cpu/residual_layer_norm.h"

#include <immintrin.h>
#include <omp.h>

#include <type_traits>

#include "backend/cpu/layer_norm_rows.h"
#include "backend/cpu/tail_mask.h"
#include "core/convert.h"
#include "core/convert_simd.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {

namespace {

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = int64_t(1) << 15;

// Per-thread rows, reused from row to row.
struct RowScratch {
  layer_norm_rows::Scratch ln;
  AddRowScratch add;
  std::vector<char> bytes;  // a row in the sum's dtype (norm output or converted gradient)
  char* row_of(DType dt, int64_t d) {
    bytes.resize(size_t(d) * dtype_size(dt));
    return bytes.data();
  }
};

const char* row_ptr(const Tensor& t, int64_t r, int64_t d) {
  return static_cast<const char*>(t.data()) + r * d * int64_t(dtype_size(t.dtype()));
}
char* row_ptr(Tensor& t, int64_t r, int64_t d) {
  return static_cast<char*>(t.data()) + r * d * int64_t(dtype_size(t.dtype()));
}

// 16-bit + 16-bit of one dtype into it, with AVX-512: 16 values widened to f32 in registers,
// added, rounded back (bf16: convert's integer rule; f16: VCVTPS2PH, nearest even).
// GCC 12 warns about its own _mm512_undefined_* placeholders inside the intrinsics (a known
// false positive), hence the pragma.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_ADD16_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
template <DType kDt>
MIXPREC_ADD16_AVX512 void add_16bit_avx512(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t d) {
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    const __m256i ra = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + j));
    const __m256i rb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j),
                        simd::narrow16<kDt>(_mm512_add_ps(simd::widen16<kDt>(ra), simd::widen16<kDt>(rb))));
  }
  if (j < d) {  // the tail, masked
    const __mmask16 k = lanes16(j, d);
    const __m512 sum = _mm512_add_ps(simd::widen16<kDt>(_mm256_maskz_loadu_epi16(k, a + j)),
                                     simd::widen16<kDt>(_mm256_maskz_loadu_epi16(k, b + j)));
    _mm256_mask_storeu_epi16(out + j, k, simd::narrow16<kDt>(sum));
  }
}
#undef MIXPREC_ADD16_AVX512
#pragma GCC diagnostic pop

// out = a + b through rows widened to T (float or double) in the scratch rows wa and wb: one
// add per value in T, one rounding to out_dt.
template <typename T>
void add_widened(const char* a, DType adt, const char* b, DType bdt, char* out, DType out_dt, int64_t d,
                 std::vector<T>& wa, std::vector<T>& wb) {
  constexpr DType wide = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  wa.resize(size_t(d));
  wb.resize(size_t(d));
  convert_elements(a, adt, wa.data(), wide, d);
  convert_elements(b, bdt, wb.data(), wide, d);
  T* x = wa.data();
  const T* y = wb.data();
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) x[j] += y[j];
  convert_elements(x, wide, out, out_dt, d);
}

}  // namespace


void add_row(const void* a_row, DType adt, const void* b_row, DType bdt, void* out_row, DType out_dt, int64_t d,
             AddRowScratch& s) {
  const char* a = static_cast<const char*>(a_row);
  const char* b = static_cast<const char*>(b_row);
  char* out = static_cast<char*>(out_row);
  if (adt == DType::f32 && out_dt == DType::f32 && bdt != DType::f64) {
    const float* bf = reinterpret_cast<const float*>(b);
    if (bdt != DType::f32) {
      s.fb.resize(size_t(d));
      convert_elements(b, bdt, s.fb.data(), DType::f32, d);
      bf = s.fb.data();
    }
    const float* af = reinterpret_cast<const float*>(a);
    float* o = reinterpret_cast<float*>(out);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) o[j] = af[j] + bf[j];
    return;
  }
  if ((adt == DType::bf16 || adt == DType::f16) && bdt == adt && out_dt == adt) {
    // Rounding the f32 sum gives the double route's bits (see residual_layer_norm.h).
    if (simd::cpu_runs_widen16()) {
      const auto* a16 = reinterpret_cast<const uint16_t*>(a);
      const auto* b16 = reinterpret_cast<const uint16_t*>(b);
      auto* o16 = reinterpret_cast<uint16_t*>(out);
      return adt == DType::bf16 ? add_16bit_avx512<DType::bf16>(a16, b16, o16, d)
                                : add_16bit_avx512<DType::f16>(a16, b16, o16, d);
    }
    return add_widened(a, adt, b, bdt, out, out_dt, d, s.fa, s.fb);
  }
  add_widened(a, adt, b, bdt, out, out_dt, d, s.da, s.db);
}

ResidualLayerNormForward residual_layer_norm_forward(const Tensor& x, const Tensor& branch, DType sum_dtype,
                                                     DType normed_dtype, int64_t d, const std::vector<double>& w,
                                                     const std::vector<double>& b, double eps,
                                                     LayerNormStats& stats) {
  MIXPREC_CHECK(x.is_contiguous() && (!branch.defined() || (branch.is_contiguous() && branch.shape() == x.shape())),
                "residual_layer_norm_forward: x and branch must be contiguous and of one shape");
  MIXPREC_CHECK(branch.defined() || x.dtype() == sum_dtype,
                "residual_layer_norm_forward: without a branch, x must already be in the sum's dtype");
  const int64_t rows = d > 0 ? x.numel() / d : 0;
  stats.mean.resize(size_t(rows));
  stats.rstd.resize(size_t(rows));
  ResidualLayerNormForward out;
  out.sum = branch.defined() ? Tensor::empty(x.shape(), sum_dtype) : x;
  out.normed = Tensor::empty(x.shape(), normed_dtype);
  const bool direct = normed_dtype == sum_dtype;  // the norm writes straight into normed
  LayerNormStats* st = &stats;
#pragma omp parallel if (rows * d > kParallelMin)
  {
    RowScratch s;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      char* srow = row_ptr(out.sum, r, d);
      if (branch.defined())
        add_row(row_ptr(x, r, d), x.dtype(), row_ptr(branch, r, d), branch.dtype(), srow, sum_dtype, d, s.add);
      char* nrow = row_ptr(out.normed, r, d);
      char* y = direct ? nrow : s.row_of(sum_dtype, d);
      layer_norm_rows::forward_row(srow, sum_dtype, 0, d, w.data(), b.data(), eps, y, st->mean[size_t(r)],
                                   st->rstd[size_t(r)], s.ln);
      if (!direct) convert_elements(y, sum_dtype, nrow, normed_dtype, d);
    }
  }
  return out;
}

ResidualLayerNormGrads residual_layer_norm_backward(const Tensor& sum, const Tensor& d_normed, const Tensor& d_sum,
                                                    int64_t d, const std::vector<double>& w,
                                                    const LayerNormStats& stats, bool need_branch,
                                                    DType branch_dtype, bool need_wb) {
  const DType sdt = sum.dtype();
  MIXPREC_CHECK(sum.is_contiguous() && (!d_normed.defined() || d_normed.is_contiguous()) &&
                    (!d_sum.defined() || (d_sum.is_contiguous() && d_sum.dtype() == sdt)),
                "residual_layer_norm_backward: contiguous gradients expected, d_sum in the sum's dtype");
  const int64_t rows = d > 0 ? sum.numel() / d : 0;
  ResidualLayerNormGrads g;
  g.dw.assign(size_t(d), 0.0);
  g.db.assign(size_t(d), 0.0);
  if (!d_normed.defined()) {
    // Only the stream's own gradient: it passes through as it is, rounded for the branch.
    g.dsum = d_sum.defined() ? d_sum : Tensor::zeros(sum.shape(), sdt);
    if (need_branch) g.dbranch = g.dsum.to(branch_dtype);
    return g;
  }
  g.dsum = Tensor::empty(sum.shape(), sdt);
  // A branch in the sum's dtype gets the same tensor, as add's backward hands both inputs g.
  const bool convert_branch = need_branch && branch_dtype != sdt;
  if (convert_branch) g.dbranch = Tensor::empty(sum.shape(), branch_dtype);
  const int threads = rows * d > kParallelMin ? omp_get_max_threads() : 1;
  std::vector<std::vector<double>> dw_part(static_cast<size_t>(threads)), db_part(static_cast<size_t>(threads));
  const DType gdt = d_normed.dtype();
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    RowScratch s;
    std::vector<double> dw_t(need_wb ? size_t(d) : 0, 0.0), db_t(need_wb ? size_t(d) : 0, 0.0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      // The normed output's gradient in the sum's dtype: what the unfused route's cast
      // node hands layer_norm (exact for a bf16 gradient of an f32 sum).
      const char* dn = row_ptr(d_normed, r, d);
      if (gdt != sdt) {
        char* c = s.row_of(sdt, d);
        convert_elements(dn, gdt, c, sdt, d);
        dn = c;
      }
      if (r + 2 < rows) {  // the next rows of this thread's block come from memory
        const char* ahead = row_ptr(d_normed, r + 2, d);
        for (int64_t j = 0; j < d * int64_t(dtype_size(gdt)); j += 64) _mm_prefetch(ahead + j, _MM_HINT_T0);
      }
      char* ds = row_ptr(g.dsum, r, d);
      layer_norm_rows::backward_row(row_ptr(sum, r, d), sdt, dn, sdt, 0, d, w.data(), stats.mean[size_t(r)],
                                    stats.rstd[size_t(r)], ds, need_wb ? dw_t.data() : nullptr,
                                    need_wb ? db_t.data() : nullptr, s.ln);
      // + the stream's own gradient: the engine's add of the two in the unfused route.
      if (d_sum.defined()) add_row(ds, sdt, row_ptr(d_sum, r, d), sdt, ds, sdt, d, s.add);
      if (convert_branch) convert_elements(ds, sdt, row_ptr(g.dbranch, r, d), branch_dtype, d);
    }
    dw_part[size_t(tid)] = std::move(dw_t);
    db_part[size_t(tid)] = std::move(db_t);
  }
  if (need_branch && !convert_branch) g.dbranch = g.dsum;
  for (int t = 0; t < threads; ++t)
    for (int64_t j = 0; j < d; ++j) {
      if (!dw_part[size_t(t)].empty()) g.dw[size_t(j)] += dw_part[size_t(t)][size_t(j)];
      if (!db_part[size_t(t)].empty()) g.db[size_t(j)] += db_part[size_t(t)][size_t(j)];
    }
  return g;
}

}  // namespace mixprec::backend::cpu
