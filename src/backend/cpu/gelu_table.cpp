// backend/cpu/gelu_table.cpp: see gelu_table.h.
#include "backend/cpu/gelu_table.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/tail_mask.h"
#include "core/convert.h"
#include "core/convert_simd.h"
#include "mixprec/core/half.h"

namespace mixprec::backend::cpu {

namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;
constexpr int64_t kBlock = 2048;                        // values per parallel work item
constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

// A bf16 or f16 input is one of 65,536 bit patterns, so GELU on them is a lookup: gelu(x)
// correctly rounded to the dtype (double arithmetic, Phi from erfc so the negative tail keeps
// its relative accuracy, one rounding through convert_elements), and the slope gelu'(x)
// correctly rounded to f32, which the backward multiplies by the incoming gradient (widened to
// f32) and rounds once to the dtype, as the f32 path does with its own slope. Why: the
// polynomial costs ~38 (forward) and ~40 (backward) 512-bit instructions per 16 values, which
// made GELU the largest cost outside the GEMMs in gpt-tiny's amp-bf16 step; a gather of 16
// table entries costs a few, and the entries a network's activations use (|x| < ~8: a few
// thousand patterns) stay in L1/L2. Results are the correctly rounded ones, the same on every
// CPU (AVX-512 gathers, or a plain loop). Tables: 3 x 64 Ki entries per dtype (128 KiB values,
// 256 KiB slopes), built once on first use (~ms).
struct Gelu16Tables {
  std::vector<uint16_t> value;  // 65,536 + 1: the gather reads 32 bits at entry i
  std::vector<float> slope;     // 65,536
};

Gelu16Tables build_gelu16_tables(DType dtype) {
  constexpr int64_t kPatterns = 65536;
  std::vector<uint16_t> bits(kPatterns);
  for (int64_t i = 0; i < kPatterns; ++i) bits[size_t(i)] = uint16_t(i);
  std::vector<double> x(kPatterns), y(kPatterns), d(kPatterns);
  convert_elements(bits.data(), dtype, x.data(), DType::f64, kPatterns);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < kPatterns; ++i) {
    const double v = x[size_t(i)];
    const double cdf = 0.5 * std::erfc(-v * kInvSqrt2);
    y[size_t(i)] = v * cdf;  // -inf * 0 = NaN at -inf, as 0.5 x (1 + erf(x / sqrt 2)) gives
    d[size_t(i)] = cdf + v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
  }
  Gelu16Tables t;
  t.value.assign(kPatterns + 1, 0);
  t.slope.resize(kPatterns);
  convert_elements(y.data(), DType::f64, t.value.data(), dtype, kPatterns);
  convert_elements(d.data(), DType::f64, t.slope.data(), DType::f32, kPatterns);
  return t;
}

// Each dtype's tables are built on its first use only (a bf16 model never builds f16's).
const Gelu16Tables& gelu16_tables(DType dtype) {
  if (dtype == DType::bf16) {
    static const Gelu16Tables bf16 = build_gelu16_tables(DType::bf16);
    return bf16;
  }
  static const Gelu16Tables f16 = build_gelu16_tables(DType::f16);
  return f16;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// dst = value[x], or with g: dst = round(g * slope[x]), 16 lanes at a time by gathers.
template <DType kDt>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void gelu16_span_avx512(const Gelu16Tables& t,
                                                                                 const uint16_t* x, const uint16_t* g,
                                                                                 uint16_t* dst, int64_t len) {
  for (int64_t i = 0; i < len; i += 16) {
    const __mmask16 m = lanes16(i, len);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
    __m256i out;
    if (g == nullptr) {
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, t.value.data(), 2);
      out = _mm512_cvtepi32_epi16(_mm512_and_si512(words, _mm512_set1_epi32(0xffff)));
    } else {
      const __m512 slope = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, t.slope.data(), 4);
      const __m512 gv = simd::widen16<kDt>(_mm256_maskz_loadu_epi16(m, g + i));
      out = simd::narrow16<kDt>(_mm512_mul_ps(gv, slope));
    }
    _mm256_mask_storeu_epi16(dst + i, m, out);
  }
}
#pragma GCC diagnostic pop

// The same without AVX-512, one value at a time (T: BFloat16 or Half).
template <typename T>
void gelu16_span_scalar(const Gelu16Tables& t, const uint16_t* x, const uint16_t* g, uint16_t* dst, int64_t len) {
  for (int64_t i = 0; i < len; ++i) {
    if (g == nullptr) {
      dst[i] = t.value[x[i]];
    } else {
      dst[i] = T(float(T::from_bits(g[i])) * t.slope[x[i]]).bits;
    }
  }
}

}  // namespace

void gelu16_path(const void* src, const void* diff_dst, void* dst, DType dtype, int64_t n) {
  const Gelu16Tables& t = gelu16_tables(dtype);
  const bool wide = simd::cpu_runs_widen16();
  const uint16_t* x = static_cast<const uint16_t*>(src);
  const uint16_t* g = static_cast<const uint16_t*>(diff_dst);
  uint16_t* out = static_cast<uint16_t*>(dst);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t off = b * kBlock, len = std::min(kBlock, n - off);
    const uint16_t* gb = g ? g + off : nullptr;
    if (dtype == DType::bf16) {
      if (wide) gelu16_span_avx512<DType::bf16>(t, x + off, gb, out + off, len);
      else gelu16_span_scalar<BFloat16>(t, x + off, gb, out + off, len);
    } else {
      if (wide) gelu16_span_avx512<DType::f16>(t, x + off, gb, out + off, len);
      else gelu16_span_scalar<Half>(t, x + off, gb, out + off, len);
    }
  }
}

}  // namespace mixprec::backend::cpu
