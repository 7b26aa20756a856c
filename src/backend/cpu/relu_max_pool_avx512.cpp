// backend/cpu/relu_max_pool_avx512.cpp: the fused relu + max-pool kernel's NHWC path on
// AVX-512 (the hot path: the convolutions return channels-last): 16 channels per vector,
// compared in f32 (bf16/f16 widened exactly), running maximum from +0 with a strict ">", the
// first NaN of a window winning; the argmax packed in registers when C is even. The rules
// are relu_max_pool.cpp's header comment; the scalar path there is their reference.
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
#define MIXPREC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

template <DType D>
MIXPREC_AVX512 inline __m512 load16(const void* p, __mmask16 m) {
  if constexpr (D == DType::f32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else if constexpr (D == DType::bf16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
}

// v holds values of dtype D (exactly representable), so the narrowing is exact.
template <DType D>
MIXPREC_AVX512 inline void store16(void* p, __m512 v, __mmask16 m) {
  if constexpr (D == DType::f32) {
    _mm512_mask_storeu_ps(p, m, v);
  } else if constexpr (D == DType::bf16) {
    const __m512i hi = _mm512_srli_epi32(_mm512_castps_si512(v), 16);
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(hi));
  } else {
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

// One dst row r = (n, oh): x: [N, H, W, C] memory; dst: [N, OH, OW, C]; codes: the row's
// OW*C byte codes, or with kPacked (C even, so every vector starts at an even element) the
// row's OW*C/2 packed bytes.
// rows: N * OH, to know whether a next row exists.
template <DType D, bool kPacked, typename T>
MIXPREC_AVX512 void forward_nhwc_row(const T* x, T* dst, uint8_t* codes, int64_t r, int64_t rows, int64_t C,
                                     int64_t H, int64_t W, int64_t k) {
  const int64_t OH = H / k, OW = W / k, n = r / OH, oh = r % OH;
  // x is the convolution's output, written long before through caches this core no longer
  // holds, and the hardware prefetchers did not keep up (perf: ~80% of this kernel's samples
  // on its first load). Ask for the next dst row's k input rows (this thread's next row under
  // the static schedule) while this one runs.
  if (r + 1 < rows) {
    const int64_t nn = (r + 1) / OH, noh = (r + 1) % OH;
    const char* next = reinterpret_cast<const char*>(x + ((nn * H + noh * k) * W) * C);
    for (int64_t b = 0; b < k * W * C * int64_t(sizeof(T)); b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
  }
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t o = (r * OW + ow) * C;
    const T* win = x + ((n * H + oh * k) * W + ow * k) * C;  // window's top-left pixel
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      const __mmask16 m = lanes16(c0, C);
      __m512 best = _mm512_setzero_ps();
      __m512i pos = _mm512_set1_epi32(kPacked ? kNoArgmaxPacked : kNoArgmax);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          const __m512 v = load16<D>(win + (i * W + j) * C + c0, m);
          // While best is not NaN, "not <=" is "v > best" (the first maximum wins, windows
          // <= 0 keep +0) or v is NaN (the first NaN wins); once best is NaN it stays.
          const __mmask16 open = _mm512_mask_cmp_ps_mask(m, best, best, _CMP_ORD_Q);
          const __mmask16 gt = _mm512_mask_cmp_ps_mask(open, v, best, _CMP_NLE_UQ);
          best = _mm512_mask_mov_ps(best, gt, v);
          pos = _mm512_mask_mov_epi32(pos, gt, _mm512_set1_epi32(static_cast<int>(i * k + j)));
        }
      store16<D>(dst + o + c0, best, m);
      if constexpr (kPacked) {
        // A 64-bit lane holds an (even, odd) pair of codes (< 16) at bits 0 and 32; shifted
        // right by 28 the odd one lands on bits 4..7 of the even one; vpmovqb keeps the byte.
        const __m128i b = _mm512_cvtepi64_epi8(_mm512_or_si512(pos, _mm512_srli_epi64(pos, 28)));
        uint8_t* out = codes + (ow * C + c0) / 2;
        if (C - c0 >= 16)
          _mm_storel_epi64(reinterpret_cast<__m128i*>(out), b);
        else
          _mm_mask_storeu_epi8(out, __mmask16((1u << ((C - c0) / 2)) - 1), b);
      } else {
        _mm_mask_storeu_epi8(codes + ow * C + c0, m, _mm512_cvtepi32_epi8(pos));
      }
    }
  }
}

template <DType D, typename T>
void forward_nhwc(const T* x, T* dst, uint8_t* arg, bool packed, int64_t N, int64_t C, int64_t H,
                  int64_t W, int64_t k) {
  const int64_t rows = N * (H / k), len = (W / k) * C;
  const bool parallel = rows * len * k * k > kParallelMin;
  if (packed && C % 2 == 0) {  // the common case packs in registers; rows are whole bytes
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) forward_nhwc_row<D, true>(x, dst, arg + r * len / 2, r, rows, C, H, W, k);
    return;
  }
  for_each_dst_row(rows, len, packed, arg, parallel,
                   [&](int64_t r, uint8_t* codes) { forward_nhwc_row<D, false>(x, dst, codes, r, rows, C, H, W, k); });
}

// One input row (n, h) with h < OH*k: dd_row/codes: dst row (n, h / k), [OW, C];
// out: diff_src row [W, C]. 16-bit dtypes move 32 lanes at a time.
template <typename T>
MIXPREC_AVX512 void backward_nhwc_row(const T* dd_row, const uint8_t* codes, T* out, int64_t C,
                                      int64_t W, int64_t k, int64_t hk) {
  const int64_t OW = W / k;
  constexpr int64_t kLanes = sizeof(T) == 4 ? 16 : 32;
  for (int64_t w = 0; w < OW * k; ++w) {
    const int64_t o = (w / k) * C;
    const int pos = static_cast<int>(hk * k + (w % k));
    for (int64_t c0 = 0; c0 < C; c0 += kLanes) {
      const int64_t rem = C - c0;
      if constexpr (sizeof(T) == 4) {
        const __mmask16 m = rem >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rem) - 1);
        const __m512i a = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, codes + o + c0));
        const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(m, a, _mm512_set1_epi32(pos));
        const __m512i g = _mm512_maskz_loadu_epi32(hit, dd_row + o + c0);
        _mm512_mask_storeu_epi32(out + w * C + c0, m, g);
      } else {
        const __mmask32 m = rem >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << rem) - 1);
        const __m512i a = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, codes + o + c0));
        const __mmask32 hit =
            _mm512_mask_cmpeq_epi16_mask(m, a, _mm512_set1_epi16(static_cast<short>(pos)));
        const __m512i g = _mm512_maskz_loadu_epi16(hit, dd_row + o + c0);
        _mm512_mask_storeu_epi16(out + w * C + c0, m, g);
      }
    }
  }
  if (OW * k < W) std::memset(out + OW * k * C, 0, sizeof(T) * (W - OW * k) * C);
}

#pragma GCC diagnostic pop

}  // namespace

// The entry points relu_max_pool_rows.h declares, shaped as relu_max_pool_avx2.cpp's on purpose:
// each ISA file binds the shared walks to its own row functions.
void forward_nhwc_avx512(DType dt, const void* x, void* dst, uint8_t* arg, bool packed, int64_t N, int64_t C,
                         int64_t H, int64_t W, int64_t k) {
  with_dtype(dt, x, dst, [&](auto d, const auto* xs, auto* ds) {
    forward_nhwc<decltype(d)::value>(xs, ds, arg, packed, N, C, H, W, k);
  });
}

void backward_nhwc_avx512(size_t elem_bytes, const void* dd, const uint8_t* arg, bool packed, void* ds, int64_t N,
                          int64_t C, int64_t H, int64_t W, int64_t k) {
  with_raw_bits(elem_bytes, dd, ds, [&](const auto* dd_p, auto* ds_p) {
    backward_nhwc_rows(dd_p, arg, packed, ds_p, N, C, H, W, k,
                       [&](const auto* dd_row, const uint8_t* codes, auto* out, int64_t hk) {
                         backward_nhwc_row(dd_row, codes, out, C, W, k, hk);
                       });
  });
}

}  // namespace mixprec::backend::cpu::relu_pool
