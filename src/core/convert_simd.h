// core/convert_simd.h: convert's rounding rules (convert.cpp) in register form, for kernels
// that round their results in registers instead of through a buffer and convert_elements
// (convert.cpp's own vector kernels, layer_norm_rows' 16-bit rows, the 16-bit residual add).
// One definition of each rule, so a value rounded here has the bits convert_elements gives.
//  - f64 -> f32 with round-to-odd (truncate, then set the last bit where anything was lost):
//    the step before a single rounding to bf16/f16, which makes that rounding correct instead
//    of double-rounded (f32 keeps >= 2 more bits than either 16-bit type).
//  - f32 -> bf16 round-to-nearest-even by integer arithmetic (BFloat16's scalar constructor,
//    half.h): unlike VCVTNEPS2BF16 it keeps f32 subnormals instead of flushing them to zero,
//    so it is right for every input, at ~5 integer operations per vector.
// f32 -> f16 needs no helper: VCVTPS2PH with an explicit round-to-nearest-even immediate is
// the rule (it ignores MXCSR's rounding mode and FTZ).
// widen16 / narrow16 below: 16 values of a 16-bit dtype to f32 (exact) and back by these rules,
// for the kernels that compute 16-bit tensors in f32 registers (GELU, the residual add).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "core/cpu_features.h"
#include "mixprec/core/dtype.h"

namespace mixprec::simd {

// 8 doubles -> 8 floats, round-to-odd. NaN and inf convert as they are (cmp_neq_oq is false
// for NaN); finite values above FLT_MAX truncate to FLT_MAX, which is odd already and rounds
// on to 16-bit inf as the value itself would.
__attribute__((target("avx512f,avx512vl"), always_inline)) inline __m256 f64x8_to_f32_round_to_odd(__m512d x) {
  const __m256 t = _mm512_cvt_roundpd_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask8 lost = _mm512_cmp_pd_mask(_mm512_cvtps_pd(t), x, _CMP_NEQ_OQ);
  return _mm256_castsi256_ps(
      _mm256_mask_or_epi32(_mm256_castps_si256(t), lost, _mm256_castps_si256(t), _mm256_set1_epi32(1)));
}

// 8 floats -> 8 bf16 bit patterns in the low halves of 32-bit lanes. NaN: truncated, quiet
// bit set; everything else, subnormals and overflow to inf included, rounds to nearest even
// by adding 0x7fff + the kept lsb (a carry into the exponent is the correct rounding).
__attribute__((target("avx2"), always_inline)) inline __m256i f32x8_to_bf16_bits(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

// The same rule on 16 floats.
__attribute__((target("avx512f"), always_inline)) inline __m512i f32x16_to_bf16_bits(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, is_nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
}

// Whether this CPU runs widen16 / narrow16 below (AVX-512 F, BW and VL, and F16C): the one
// test for every kernel built on them.
inline bool cpu_runs_widen16() {
  const CpuFeatures& c = cpu_features();
  return c.avx512f && c.avx512bw && c.avx512vl && c.f16c;
}

// 16 bf16 / f16 bit patterns -> 16 floats (exact), and 16 floats -> 16 bf16 / f16 rounded
// to nearest even (bf16: the integer rule above, subnormals kept; f16: VCVTPS2PH).
#define MIXPREC_SIMD_16BIT __attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline))
template <DType kDt>
MIXPREC_SIMD_16BIT inline __m512 widen16(__m256i raw) {
  static_assert(kDt == DType::bf16 || kDt == DType::f16);
  if constexpr (kDt == DType::bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  else return _mm512_cvtph_ps(raw);
}
template <DType kDt>
MIXPREC_SIMD_16BIT inline __m256i narrow16(__m512 v) {
  static_assert(kDt == DType::bf16 || kDt == DType::f16);
  if constexpr (kDt == DType::bf16) return _mm512_cvtepi32_epi16(f32x16_to_bf16_bits(v));
  else return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#undef MIXPREC_SIMD_16BIT

}  // namespace mixprec::simd
