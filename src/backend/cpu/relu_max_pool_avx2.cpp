// backend/cpu/relu_max_pool_avx2.cpp: the fused relu + max-pool kernel's NHWC path on AVX2
// without AVX-512 (AMD Zen2/Zen3, Intel Haswell..Comet Lake): the AVX-512 path's rule, 8
// channels per vector (16 in the backward's 16-bit selects), channel tails in scalar code;
// codes written as bytes and packed per row pair (relu_max_pool_rows.h).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/relu_max_pool_rows.h"
#include "backend/cpu/tail_mask.h"

namespace mixprec::backend::cpu::relu_pool {
namespace {

// GCC 12 flags the intrinsics' internal _mm*_undefined_*() as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_AVX2 __attribute__((target("avx2,f16c")))

template <DType D>
MIXPREC_AVX2 inline __m256 load8(const void* p) {
  if constexpr (D == DType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(p));
  } else if constexpr (D == DType::bf16) {
    const __m128i raw = _mm_loadu_si128(static_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  }
}

// v holds values of dtype D (exactly representable), so the narrowing is exact.
template <DType D>
MIXPREC_AVX2 inline void store8(void* p, __m256 v) {
  if constexpr (D == DType::f32) {
    _mm256_storeu_ps(static_cast<float*>(p), v);
  } else if constexpr (D == DType::bf16) {
    // Every lane is < 2^16, so packus's saturation changes nothing; it packs per 128-bit
    // lane (quads: h0-3 h0-3 h4-7 h4-7) and the permute brings h0-3 h4-7 together.
    const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(hi, hi), 0x08);
    _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  } else {
    _mm_storeu_si128(static_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

// One window and channel in scalar code (the channel tail): forward_scalar's rule.
template <typename T>
uint8_t window_scalar(const T* win, DType dt, int64_t W, int64_t C, int64_t k, T* out) {
  float m = 0.0f;
  int64_t best = -1;
  uint8_t pos = kNoArgmax;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t off = (i * W + j) * C;
      const float v = load_scalar(win, dt, off);
      if (v > m || (std::isnan(v) && !std::isnan(m))) {
        m = v;
        best = off;
        pos = static_cast<uint8_t>(i * k + j);
      }
    }
  *out = best >= 0 ? win[best] : T(0);  // raw bits; +0 in every dtype
  return pos;
}

// One dst row r = (n, oh) as forward_nhwc_row, writing one byte code per element.
template <DType D, typename T>
MIXPREC_AVX2 void forward_nhwc_row_avx2(const T* x, T* dst, uint8_t* codes, int64_t r, int64_t C,
                                        int64_t H, int64_t W, int64_t k) {
  const int64_t OH = H / k, OW = W / k, n = r / OH, oh = r % OH, C8 = C / 8 * 8;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t o = (r * OW + ow) * C;
    const T* win = x + ((n * H + oh * k) * W + ow * k) * C;  // window's top-left pixel
    for (int64_t c0 = 0; c0 < C8; c0 += 8) {
      __m256 best = _mm256_setzero_ps();
      __m256i pos = _mm256_set1_epi32(kNoArgmax);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          const __m256 v = load8<D>(win + (i * W + j) * C + c0);
          // As the AVX-512 row: "not <=" while best is not NaN.
          const __m256 open = _mm256_cmp_ps(best, best, _CMP_ORD_Q);
          const __m256 gt = _mm256_and_ps(open, _mm256_cmp_ps(v, best, _CMP_NLE_UQ));
          best = _mm256_blendv_ps(best, v, gt);
          pos = _mm256_blendv_epi8(pos, _mm256_set1_epi32(static_cast<int>(i * k + j)),
                                   _mm256_castps_si256(gt));
        }
      store8<D>(dst + o + c0, best);
      alignas(32) int32_t p[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(p), pos);
      for (int l = 0; l < 8; ++l) codes[ow * C + c0 + l] = static_cast<uint8_t>(p[l]);
    }
    for (int64_t c = C8; c < C; ++c) codes[ow * C + c] = window_scalar(win + c, D, W, C, k, dst + o + c);
  }
}

template <DType D, typename T>
void forward_nhwc_avx2(const T* x, T* dst, uint8_t* arg, bool packed, int64_t N, int64_t C,
                       int64_t H, int64_t W, int64_t k) {
  const int64_t rows = N * (H / k), len = (W / k) * C;
  for_each_dst_row(rows, len, packed, arg, rows * len * k * k > kParallelMin,
                   [&](int64_t r, uint8_t* codes) { forward_nhwc_row_avx2<D>(x, dst, codes, r, C, H, W, k); });
}

// One input row as backward_nhwc_row: 8 f32 or 16 16-bit lanes, a select on the raw bits.
template <typename T>
MIXPREC_AVX2 void backward_nhwc_row_avx2(const T* dd_row, const uint8_t* codes, T* out, int64_t C,
                                         int64_t W, int64_t k, int64_t hk) {
  const int64_t OW = W / k;
  for (int64_t w = 0; w < OW * k; ++w) {
    const int64_t o = (w / k) * C;
    const int pos = static_cast<int>(hk * k + (w % k));
    int64_t c0 = 0;
    if constexpr (sizeof(T) == 4) {
      const __m256i want = _mm256_set1_epi32(pos);
      for (; c0 + 8 <= C; c0 += 8) {
        const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + o + c0)));
        const __m256i g = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd_row + o + c0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + w * C + c0),
                            _mm256_and_si256(g, _mm256_cmpeq_epi32(a, want)));
      }
    } else {
      const __m256i want = _mm256_set1_epi16(static_cast<short>(pos));
      for (; c0 + 16 <= C; c0 += 16) {
        const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + o + c0)));
        const __m256i g = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd_row + o + c0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + w * C + c0),
                            _mm256_and_si256(g, _mm256_cmpeq_epi16(a, want)));
      }
    }
    for (; c0 < C; ++c0) out[w * C + c0] = codes[o + c0] == pos ? dd_row[o + c0] : T(0);
  }
  if (OW * k < W) std::memset(out + OW * k * C, 0, sizeof(T) * (W - OW * k) * C);
}

#pragma GCC diagnostic pop

}  // namespace

// The entry points relu_max_pool_rows.h declares, shaped as relu_max_pool_avx512.cpp's on purpose:
// each ISA file binds the shared walks to its own row functions.
void forward_nhwc_avx2(DType dt, const void* x, void* dst, uint8_t* arg, bool packed, int64_t N, int64_t C,
                       int64_t H, int64_t W, int64_t k) {
  with_dtype(dt, x, dst, [&](auto d, const auto* xs, auto* ds) {
    forward_nhwc_avx2<decltype(d)::value>(xs, ds, arg, packed, N, C, H, W, k);
  });
}

void backward_nhwc_avx2(size_t elem_bytes, const void* dd, const uint8_t* arg, bool packed, void* ds, int64_t N,
                        int64_t C, int64_t H, int64_t W, int64_t k) {
  with_raw_bits(elem_bytes, dd, ds, [&](const auto* dd_p, auto* ds_p) {
    backward_nhwc_rows(dd_p, arg, packed, ds_p, N, C, H, W, k,
                       [&](const auto* dd_row, const uint8_t* codes, auto* out, int64_t hk) {
                         backward_nhwc_row_avx2(dd_row, codes, out, C, W, k, hk);
                       });
  });
}

}  // namespace mixprec::backend::cpu::relu_pool
