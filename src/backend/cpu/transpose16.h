// backend/cpu/transpose16.h: the in-register transpose of a 16 x 16 tile of 32-bit values (a
// float, or a pair of bf16 as one word), shared by the fused attention's K^T / V^T packing
// (flash_attention.cpp) and the weight gradient's transpose + column sums (column_sum.cpp).
// The classic four stages: 32-bit and 64-bit interleaves within 128-bit lanes, then two 4 x 4
// transposes of the lanes. Callers unroll their own loops over the tile (GCC unroll pragmas):
// a rolled loop keeps the tile in memory, which measured twice as slow.
#pragma once
#include <immintrin.h>

namespace mixprec::backend::cpu {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// r[i] holds row i on entry, column i on exit.
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16(__m512i r[16]) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4g + k]: in 128-bit lane L, column 4L + k of rows 4g .. 4g + 3.
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  // Column 4L + k is lane L of r[k], r[4 + k], r[8 + k], r[12 + k], in that order.
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i f0 = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88), f1 = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xdd),
                  f2 = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88),
                  f3 = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xdd);
    t[k] = _mm512_shuffle_i32x4(f0, f2, 0x88);
    t[4 + k] = _mm512_shuffle_i32x4(f1, f3, 0x88);
    t[8 + k] = _mm512_shuffle_i32x4(f0, f2, 0xdd);
    t[12 + k] = _mm512_shuffle_i32x4(f1, f3, 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// The same on floats (the casts are free).
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16(__m512 r[16]) {
  __m512i w[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) w[i] = _mm512_castps_si512(r[i]);
  transpose16x16(w);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(w[i]);
}
#pragma GCC diagnostic pop

}  // namespace mixprec::backend::cpu
