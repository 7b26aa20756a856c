// backend/cpu/relu_max_pool_rows.cpp: the argmax's 4-bit packing (AVX-512 where the CPU has
// it, else scalar) and the per-thread code buffer (relu_max_pool_rows.h).
#include "backend/cpu/relu_max_pool_rows.h"

#include <immintrin.h>

#include <vector>

namespace mixprec::backend::cpu::relu_pool {
namespace {

// GCC 12 flags the intrinsics' internal _mm*_undefined_*() as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// Memory (little endian) of a u16 lane of bytes [b0, b1] is b0 | b1 << 8; the packed byte
// is (b0 & 0xF) | (b1 & 0xF) << 4, left in the lane's low byte for vpmovwb.
MIXPREC_AVX512 inline __m512i pack_lanes(__m512i v) {
  return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi16(0x000F)),
                         _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi16(0x00F0)));
}

MIXPREC_AVX512 void pack_avx512(const uint8_t* src, int64_t pairs, uint8_t* dst) {
  int64_t i = 0;
  for (; i + 32 <= pairs; i += 32)
    _mm512_mask_cvtepi16_storeu_epi8(dst + i, __mmask32(0xFFFFFFFFu),
                                     pack_lanes(_mm512_loadu_si512(src + 2 * i)));
  if (i < pairs) {
    const __mmask32 m = __mmask32((1u << (pairs - i)) - 1);
    _mm512_mask_cvtepi16_storeu_epi8(dst + i, m, pack_lanes(_mm512_maskz_loadu_epi16(m, src + 2 * i)));
  }
}

// The inverse: a zero-extended byte b in a u16 lane becomes bytes [b & 0xF, b >> 4].
MIXPREC_AVX512 inline __m512i unpack_lanes(__m512i b) {
  return _mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi16(0x000F)),
                         _mm512_slli_epi16(_mm512_and_si512(b, _mm512_set1_epi16(0x00F0)), 4));
}

// n elements from element 0 of src (an even element index).
MIXPREC_AVX512 void unpack_avx512(const uint8_t* src, int64_t n, uint8_t* dst) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64)
    _mm512_storeu_si512(dst + j, unpack_lanes(_mm512_cvtepu8_epi16(_mm256_loadu_si256(
                                     reinterpret_cast<const __m256i*>(src + j / 2)))));
  if (j < n) {
    const int64_t rem = n - j, bytes = (rem + 1) / 2;  // rem < 64, bytes <= 32
    const __mmask32 bm = bytes >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << bytes) - 1);
    const __m512i v = unpack_lanes(_mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(bm, src + j / 2)));
    _mm512_mask_storeu_epi8(dst + j, __mmask64((uint64_t(1) << rem) - 1), v);
  }
}

#pragma GCC diagnostic pop

}  // namespace

// n byte codes (any n; src[n] is scratch) -> ceil(n/2) packed bytes, the odd tail padded
// with "none".
void pack_nibbles(uint8_t* src, int64_t n, uint8_t* dst) {
  if (n % 2 != 0) src[n++] = kNoArgmax;
  if (has_avx512()) return pack_avx512(src, n / 2, dst);
  for (int64_t i = 0; i < n / 2; ++i)
    dst[i] = static_cast<uint8_t>((src[2 * i] & 0xF) | (src[2 * i + 1] & 0xF) << 4);
}

// Elements [start, start + n) of a packed argmax -> n byte codes.
void unpack_nibbles(const uint8_t* packed, int64_t start, int64_t n, uint8_t* dst) {
  if (n > 0 && start % 2 != 0) {
    *dst++ = nibble(packed, start++);
    --n;
  }
  if (has_avx512()) return unpack_avx512(packed + start / 2, n, dst);
  for (int64_t j = 0; j < n; ++j) dst[j] = nibble(packed, start + j);
}

uint8_t* scratch(size_t bytes) {
  static thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

}  // namespace mixprec::backend::cpu::relu_pool
