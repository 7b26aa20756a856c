// backend/cpu/tail_mask.h: the AVX-512 lane masks for the last, partial vector of a row.
// Every kernel here walks a row 8 doubles or 16 floats at a time and masks the lanes that
// lie past the row's end; one definition keeps the edge (exactly 8 or 16 left: all lanes)
// the same everywhere.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mixprec::backend::cpu {

// The lanes of elements i .. i+7 that lie inside a row of n (n > i).
inline __mmask8 lanes8(int64_t i, int64_t n) {
  return n - i >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - i)) - 1u);
}

// The lanes of elements i .. i+15 that lie inside a row of n (n > i).
inline __mmask16 lanes16(int64_t i, int64_t n) {
  return n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
}

// lanes16 where the row may also end before i (then no lane).
inline __mmask16 lanes16_any(int64_t i, int64_t n) { return n <= i ? __mmask16(0) : lanes16(i, n); }

}  // namespace mixprec::backend::cpu
