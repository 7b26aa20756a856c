// backend/cpu/relu_max_pool.cpp: fused ReLU + max pooling kernels (see relu_max_pool.h).
// Letters: N batch, C channels, H/W input, OH/OW output (= H/k, W/k, floor), k window.
//
// Paths:
// - NHWC on AVX-512 (the hot path: the convolutions return channels-last): 16 channels
//   per vector, compared in f32 (bf16/f16 widened exactly), running maximum starting at
//   +0 with a strict ">" so the first maximum wins and windows <= 0 keep "no argmax"; the
//   first NaN of a window beats every number, as relu + max_pool2d propagate NaN in PyTorch.
//   Backward writes every diff_src element once: diff_dst where the argmax names that
//   window position, else +0 (a pure select on the raw bits, no arithmetic).
// - NHWC on AVX2 (no AVX-512: AMD Zen2/Zen3, Intel Haswell..Comet Lake): the same rule, 8
//   channels per vector (16 in the backward's 16-bit selects), channel tails in scalar code;
//   codes are written as bytes and packed per row pair like the scalar path.
// - Everything else (NCHW, neither ISA): the same rule in scalar loops over strides.
// Argmax: the kernels compute one byte code per output (position, or 255 = none). Packed
// (k <= 3): NHWC on AVX-512 with an even C packs pairs of codes in registers (a vector of
// 16 channels starts at an even element); every other case writes the codes of a pair of
// dst rows to a thread-local buffer and packs that (255 & 0xF is the packed "none"). The
// backward unpacks one dst row at a time. A "row" is a run of dst elements adjacent in
// memory: (n, c, oh) x ow for NCHW, (n, oh) x (ow, c) for NHWC on AVX-512, (n, oh, ow) x c
// for NHWC in scalar code.
// Threads: OpenMP over dst rows (in-register packing: every row is whole bytes) or pairs
// of dst rows (a pair starts at an even element, so no packed byte is shared between
// threads) in the forward, N*H input rows (N*C*H for the scalar path) in the backward;
// skipped below ~32K elements, where the fork costs more than the work (limits.md §1.5).
// Longer than 400 lines on purpose: the AVX-512, AVX2 and scalar paths of one fused kernel
// and its backward, kept side by side so that their NaN, tie and "no argmax" rules can be
// compared line by line (tests/unit/ops/fused_relu_pool_test.cpp checks every path against
// relu + max_pool2d).
#include "backend/cpu/relu_max_pool.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/half.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

float load_scalar(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return detail::bfloat16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return detail::half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

// Copies element i of src to element o of dst, raw bits (the maximum is one of the inputs).
void copy_raw(const void* src, int64_t i, void* dst, int64_t o, size_t es) {
  std::memcpy(static_cast<char*>(dst) + o * es, static_cast<const char*>(src) + i * es, es);
}

bool has_avx512() { return cpu_features().avx512bw && cpu_features().avx512vl; }

// GCC 12 flags the intrinsics' internal _mm*_undefined_*() as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// ---- 4-bit argmax: bytes <-> nibbles ------------------------------------------------
// Byte codes are 0..k*k-1 (< 15) or 255; the low nibble keeps positions and maps 255 to 15.

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

// n byte codes (any n; src[n] is scratch) -> ceil(n/2) packed bytes, the odd tail padded
// with "none".
void pack_nibbles(uint8_t* src, int64_t n, uint8_t* dst) {
  if (n % 2 != 0) src[n++] = kNoArgmax;
  if (has_avx512()) return pack_avx512(src, n / 2, dst);
  for (int64_t i = 0; i < n / 2; ++i)
    dst[i] = static_cast<uint8_t>((src[2 * i] & 0xF) | (src[2 * i + 1] & 0xF) << 4);
}

uint8_t nibble(const uint8_t* packed, int64_t i) {
  return static_cast<uint8_t>((packed[i / 2] >> (4 * (i % 2))) & 0xF);
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

// A thread's byte-code buffer for one or two dst rows; it only grows, so a steady-state
// training step allocates nothing here.
uint8_t* scratch(size_t bytes) {
  static thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// Calls row_fn(r, codes) for every dst row r (`len` elements, adjacent in memory), which
// writes the row's byte codes to codes[0..len); stores them into arg as bytes or nibbles.
// Threads take pairs of rows: a pair starts at element 2q*len, even, so a packed byte is
// never written by two threads.
template <typename RowFn>
void for_each_dst_row(int64_t rows, int64_t len, bool packed, uint8_t* arg, bool parallel,
                      const RowFn& row_fn) {
  const int64_t pairs = (rows + 1) / 2;
#pragma omp parallel if (parallel)
  {
    uint8_t* buf = packed ? scratch(size_t(2 * len + 1)) : nullptr;  // +1: pack_nibbles' pad
#pragma omp for schedule(static)
    for (int64_t q = 0; q < pairs; ++q) {
      const int64_t r0 = 2 * q, r1 = std::min(r0 + 2, rows);
      for (int64_t r = r0; r < r1; ++r) row_fn(r, packed ? buf + (r - r0) * len : arg + r * len);
      if (packed) pack_nibbles(buf, (r1 - r0) * len, arg + q * len);
    }
  }
}

// ---- scalar path: any strides ------------------------------------------------------

// Walks dst in its memory order (nhwc: rows (n, oh, ow) of C; else rows (n, c, oh) of OW),
// so the code of dst element o goes to argmax element o.
void forward_scalar(const Tensor& x, Tensor& dst, uint8_t* arg, bool packed, int64_t k, bool nhwc) {
  const int64_t N = x.size(0), C = x.size(1), OH = dst.size(2), OW = dst.size(3);
  const Shape& xs = x.strides();
  const DType dt = x.dtype();
  const size_t es = dtype_size(dt);
  const void* xp = x.data();
  void* dp = dst.data();
  const int64_t rows = nhwc ? N * OH * OW : N * C * OH, len = nhwc ? C : OW;
  for_each_dst_row(rows, len, packed, arg, dst.numel() * k * k > kParallelMin, [&](int64_t r, uint8_t* codes) {
    for (int64_t j = 0; j < len; ++j) {
      int64_t n, c, oh, ow;
      if (nhwc) {
        n = r / (OH * OW), oh = (r / OW) % OH, ow = r % OW, c = j;
      } else {
        n = r / (C * OH), c = (r / OH) % C, oh = r % OH, ow = j;
      }
      float m = 0.0f;
      int64_t best = -1;
      uint8_t pos = kNoArgmax;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t jj = 0; jj < k; ++jj) {
          const int64_t off = n * xs[0] + c * xs[1] + (oh * k + i) * xs[2] + (ow * k + jj) * xs[3];
          const float v = load_scalar(xp, dt, off);
          // Strict: the first maximum wins; the first NaN beats every number.
          if (v > m || (std::isnan(v) && !std::isnan(m))) {
            m = v;
            best = off;
            pos = static_cast<uint8_t>(i * k + jj);
          }
        }
      const int64_t o = r * len + j;  // dst is freshly allocated, dense in this order
      if (best >= 0) {
        copy_raw(xp, best, dp, o, es);
      } else {
        std::memset(static_cast<char*>(dp) + o * es, 0, es);  // +0 in every dtype
      }
      codes[j] = pos;
    }
  });
}

// dd is dense in the forward's memory order, so its offset of an output is also that
// output's argmax element.
void backward_scalar(const Tensor& dd, const uint8_t* ap, bool packed, Tensor& diff_src, int64_t k) {
  const int64_t N = diff_src.size(0), C = diff_src.size(1), H = diff_src.size(2),
                W = diff_src.size(3), OH = dd.size(2), OW = dd.size(3);
  const Shape &ss = diff_src.strides(), &gs = dd.strides();
  const size_t es = dtype_size(diff_src.dtype());
  const void* gp = dd.data();
  void* sp = diff_src.data();
  const int64_t rows = N * C * H;
#pragma omp parallel for schedule(static) if (diff_src.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / (C * H), c = (r / H) % C, h = r % H;
    for (int64_t w = 0; w < W; ++w) {
      const int64_t o = n * ss[0] + c * ss[1] + h * ss[2] + w * ss[3];
      const int64_t oh = h / k, ow = w / k;
      if (oh < OH && ow < OW) {
        const int64_t a = n * gs[0] + c * gs[1] + oh * gs[2] + ow * gs[3];
        if ((packed ? nibble(ap, a) : ap[a]) == (h % k) * k + (w % k)) {
          copy_raw(gp, a, sp, o, es);
          continue;
        }
      }
      std::memset(static_cast<char*>(sp) + o * es, 0, es);
    }
  }
}

// ---- NHWC AVX-512 path -----------------------------------------------------------

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


// ---- NHWC AVX2 path (no AVX-512) ------------------------------------------------------

#define MIXPREC_AVX2 __attribute__((target("avx2,f16c")))

bool has_avx2() { return cpu_features().avx2 && cpu_features().f16c; }

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

// dd: [N, OH, OW, C]; diff_src: [N, H, W, C]. A packed dst row is unpacked once and reused
// by the k input rows it covers (static schedule: a thread's input rows are consecutive).
template <bool kAvx512, typename T>
void backward_nhwc(const T* dd, const uint8_t* arg, bool packed, T* ds, int64_t N, int64_t C,
                   int64_t H, int64_t W, int64_t k) {
  const int64_t OH = H / k, rows = N * H, len = (W / k) * C;
#pragma omp parallel if (rows * W * C > kParallelMin)
  {
    uint8_t* buf = packed ? scratch(size_t(len)) : nullptr;
    int64_t unpacked = -1;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = r / H, h = r % H, oh = h / k, drow = n * OH + oh;
      T* out = ds + r * W * C;
      if (oh >= OH) {  // the row floor mode dropped
        std::memset(out, 0, sizeof(T) * W * C);
        continue;
      }
      if (packed && unpacked != drow) {
        unpack_nibbles(arg, drow * len, len, buf);
        unpacked = drow;
      }
      const uint8_t* codes = packed ? buf : arg + drow * len;
      if constexpr (kAvx512)
        backward_nhwc_row(dd + drow * len, codes, out, C, W, k, h % k);
      else
        backward_nhwc_row_avx2(dd + drow * len, codes, out, C, W, k, h % k);
    }
  }
}

void check_kernel(const char* op, int64_t kernel) {
  if (kernel < 1 || kernel > 15)
    bad(std::string(op) + ": kernel " + std::to_string(kernel) +
        " must be in 1..15 (the argmax is at most one byte and 255 means 'no maximum > 0')");
}

}  // namespace

ReluMaxPoolResult relu_max_pool2d_forward(const Tensor& src, int64_t kernel) {
  const char* op = "relu_max_pool2d_forward";
  check_kernel(op, kernel);
  if (src.dim() != 4) bad(std::string(op) + ": src " + src.str() + " must be 4-D [N, C, H, W]");
  const DType dt = src.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    bad(std::string(op) + ": src dtype " + dtype_name(dt) + " unsupported (expected f32, bf16 or f16)");
  if (src.size(2) < kernel || src.size(3) < kernel)
    bad(std::string(op) + ": kernel " + std::to_string(kernel) + " is larger than src " +
        shape_str(src.shape()));
  const Tensor x = src.is_dense() ? src : src.contiguous();
  const MemoryFormat f = x.suggest_memory_format();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const Shape out_shape{N, C, H / kernel, W / kernel};
  const bool packed = argmax_is_packed(kernel);
  const int64_t numel = shape_numel(out_shape);
  ReluMaxPoolResult r{Tensor::empty(out_shape, dt, f),
                      packed ? Tensor::empty({(numel + 1) / 2}, DType::u8)
                             : Tensor::empty(out_shape, DType::u8, f),
                      f};
  if (numel == 0) return r;
  uint8_t* arg = r.argmax.data_ptr<uint8_t>();
  const bool nhwc = f == MemoryFormat::channels_last && !x.is_contiguous();
  if (nhwc && has_avx512()) {
    if (dt == DType::f32)
      forward_nhwc<DType::f32>(x.data_ptr<float>(), r.dst.data_ptr<float>(), arg, packed, N, C, H, W,
                               kernel);
    else if (dt == DType::bf16)
      forward_nhwc<DType::bf16>(x.data_ptr<uint16_t>(), r.dst.data_ptr<uint16_t>(), arg, packed, N, C,
                                H, W, kernel);
    else
      forward_nhwc<DType::f16>(x.data_ptr<uint16_t>(), r.dst.data_ptr<uint16_t>(), arg, packed, N, C,
                               H, W, kernel);
  } else if (nhwc && has_avx2()) {
    if (dt == DType::f32)
      forward_nhwc_avx2<DType::f32>(x.data_ptr<float>(), r.dst.data_ptr<float>(), arg, packed, N, C,
                                    H, W, kernel);
    else if (dt == DType::bf16)
      forward_nhwc_avx2<DType::bf16>(x.data_ptr<uint16_t>(), r.dst.data_ptr<uint16_t>(), arg, packed,
                                     N, C, H, W, kernel);
    else
      forward_nhwc_avx2<DType::f16>(x.data_ptr<uint16_t>(), r.dst.data_ptr<uint16_t>(), arg, packed,
                                    N, C, H, W, kernel);
  } else {
    forward_scalar(x, r.dst, arg, packed, kernel, f == MemoryFormat::channels_last);
  }
  return r;
}

Tensor relu_max_pool2d_backward(const Tensor& diff_dst, const Tensor& argmax,
                                const Shape& src_shape, int64_t kernel, MemoryFormat format) {
  const char* op = "relu_max_pool2d_backward";
  check_kernel(op, kernel);
  if (src_shape.size() != 4)
    bad(std::string(op) + ": src shape " + shape_str(src_shape) + " must be 4-D [N, C, H, W]");
  const Shape out_shape{src_shape[0], src_shape[1], src_shape[2] / kernel, src_shape[3] / kernel};
  const bool packed = argmax_is_packed(kernel);
  const Shape arg_shape = packed ? Shape{(shape_numel(out_shape) + 1) / 2} : out_shape;
  const bool arg_ok = argmax.defined() && argmax.dtype() == DType::u8 && argmax.shape() == arg_shape &&
                      (packed ? argmax.is_contiguous()
                              : format == MemoryFormat::channels_last ? argmax.is_channels_last()
                                                                      : argmax.is_contiguous());
  if (!arg_ok)
    bad(std::string(op) + ": argmax " + (argmax.defined() ? argmax.str() : std::string("undefined")) +
        " must be the dense u8 " + shape_str(arg_shape) + " tensor the forward returned (kernel " +
        std::to_string(kernel) + (packed ? ", 4-bit packed)" : ", one byte per output)"));
  if (diff_dst.shape() != out_shape)
    bad(std::string(op) + ": diff_dst " + diff_dst.str() + " must have shape " + shape_str(out_shape));
  const DType dt = diff_dst.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    bad(std::string(op) + ": diff_dst dtype " + dtype_name(dt) +
        " unsupported (expected f32, bf16 or f16)");
  // diff_dst must walk the same element order as argmax (both are indexed with dd's offsets).
  const bool same_order = format == MemoryFormat::channels_last ? diff_dst.is_channels_last()
                                                                : diff_dst.is_contiguous();
  const Tensor dd = same_order ? diff_dst : diff_dst.detach().to_memory_format(format);
  Tensor diff_src = Tensor::empty(src_shape, dt, format);
  if (diff_src.numel() == 0) return diff_src;
  const uint8_t* arg = argmax.data_ptr<uint8_t>();
  if (format == MemoryFormat::channels_last && (has_avx512() || has_avx2())) {
    const int64_t N = src_shape[0], C = src_shape[1], H = src_shape[2], W = src_shape[3];
    auto run = [&](auto* dd_p, auto* ds_p) {
      if (has_avx512())
        backward_nhwc<true>(dd_p, arg, packed, ds_p, N, C, H, W, kernel);
      else
        backward_nhwc<false>(dd_p, arg, packed, ds_p, N, C, H, W, kernel);
    };
    if (dt == DType::f32)
      run(dd.data_ptr<uint32_t>(), diff_src.data_ptr<uint32_t>());
    else
      run(dd.data_ptr<uint16_t>(), diff_src.data_ptr<uint16_t>());
  } else {
    backward_scalar(dd, arg, packed, diff_src, kernel);
  }
  return diff_src;
}

}  // namespace mixprec::backend::cpu
