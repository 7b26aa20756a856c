// backend/cpu/conv_relu_pool.cpp: the fused first-layer kernels (see conv_relu_pool.h).
// Letters: N batch, C input channels (1-3), H/W input = convolution output, OH/OW pooled
// (H/2, W/2, floor), O output channels (16-64, 16 per AVX-512 vector), t = c*9 + ky*3 + kx.
//
// Both kernels walk pooled rows (n, oh) in parallel. A pooled row needs input rows 2oh-1 ..
// 2oh+2 (4 rows, zero outside the image: the padding), which are first copied to f32, C x 4
// rows of W + 2 columns with the padding columns, so every tap is a plain load. Weights are
// transposed once per call to f32 [t][O], so a tap's 16 output channels are one vector.
// Forward: per pooled output and 16 channels, the 4 window positions' convolutions (27
// broadcast FMAs each), rounded to the dtype, then ReLU + max + argmax by relu_max_pool.h's
// rules. Backward: per pooled output and 16 channels, the gradient goes to the window
// position the argmax names, and each tap's 16 weight gradients accumulate it times the
// input value under the tap at that position (picked per lane by a permute): one channel's
// 9 vector accumulators held in registers along the row; per-thread partial sums, added in thread
// order (the result depends on the thread count only, as oneDNN's does).
// bf16 on a CPU with AVX512-BF16: the forward's products are vdpbf16ps pairs instead (twice
// the FMAs' rate), over pair buffers built per pooled row (forward_row_bf16).
// Longer than 400 lines: the forward's two products (f32 FMAs, bf16 pairs) share this file's
// row loading and pooling epilogue, and the backward its neighbourhood picks.
#include "backend/cpu/conv_relu_pool.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "mixprec/core/half.h"

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kNone = 15;  // packed "no argmax"

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

bool has_avx512() {
  const auto& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl;
}

// GCC 12 flags the intrinsics' internal _mm*_undefined_*() as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))

// W contiguous values of dtype dt widened to f32 into row; returns a mask of the lanes that
// held inf or NaN (0: all finite).
MIXPREC_AVX512 __mmask16 widen_row(const char* src, DType dt, int64_t W, float* row) {
  __mmask16 bad = 0;
  for (int64_t x = 0; x < W; x += 16) {
    const __mmask16 m = lanes16(x, W);
    __m512 v;
    if (dt == DType::f32) {
      v = _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(src) + x);
    } else {
      const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(src) + x);
      v = dt == DType::f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    _mm512_mask_storeu_ps(row + x, m, v);
    const __m512i e = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7f800000));
    bad |= _mm512_mask_cmpeq_epi32_mask(m, e, _mm512_set1_epi32(0x7f800000));
  }
  return bad;
}

// Channel c of a channels-last row of W pixels x C (2 or 3) channels in f32 (tmp) into out[0..W):
// 16 pixels a time from the 2 or 3 vectors that hold their C x 16 values, by permutes (the
// scalar copy this replaced took 3.9% of the seed CNN's step: forward and backward both call
// load_rows per pooled row).
MIXPREC_AVX512 void deinterleave(const float* tmp, int64_t W, int C, int c, float* out) {
  const __m512i j = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                        _mm512_set1_epi32(C)),
                                     _mm512_set1_epi32(c));  // lane i: value C i + c of the block
  const __mmask16 third = _mm512_cmpge_epi32_mask(j, _mm512_set1_epi32(32));
  const __m512i j3 = _mm512_sub_epi32(j, _mm512_set1_epi32(32));
  const int64_t n = W * C;
  for (int64_t x = 0; x < W; x += 16) {
    const float* s = tmp + x * C;
    const int64_t left = n - x * C;
    __m512 r = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lanes16_any(0, left), s), j,
                                      _mm512_maskz_loadu_ps(lanes16_any(16, left), s + 16));
    if (C == 3) r = _mm512_mask_permutexvar_ps(r, third, j3, _mm512_maskz_loadu_ps(lanes16_any(32, left), s + 32));
    _mm512_mask_storeu_ps(out + x, lanes16(x, W), r);
  }
}

// Rows 2oh-1 .. 2oh+2 of image n, every channel, as f32 with a zero column on each side:
// xr[(c * 4 + r) * (W + 2) + 1 + x] = src[n, c, 2oh - 1 + r, x] (0 outside the image).
// Returns false when a value copied is inf or NaN.
MIXPREC_AVX512 bool load_rows(const Tensor& src, int64_t n, int64_t oh, float* xr) {
  const int64_t C = src.size(1), H = src.size(2), W = src.size(3), Wp = W + 2;
  const Shape& st = src.strides();
  const char* base = static_cast<const char*>(src.data());
  const DType dt = src.dtype();
  const size_t es = dtype_size(dt);
  bool finite = true;
  if (st[1] == 1 && st[3] == C && C > 1) {  // channels-last: a row's channels interleaved
    float* tmp = xr + C * 4 * Wp;              // scratch past the rows (see the callers' sizes)
    // The next pooled row's two new input rows (this thread's next call), from memory.
    for (int64_t y = 2 * oh + 3; y <= 2 * oh + 4 && y < H; ++y)
      for (int64_t b = 0; b < W * C * int64_t(es); b += 64)
        _mm_prefetch(base + (n * st[0] + y * st[2]) * int64_t(es) + b, _MM_HINT_T0);
    for (int64_t r = 0; r < 4; ++r) {
      const int64_t y = 2 * oh - 1 + r;
      if (y >= 0 && y < H) finite &= widen_row(base + (n * st[0] + y * st[2]) * int64_t(es), dt, W * C, tmp) == 0;
      for (int64_t c = 0; c < C; ++c) {
        float* row = xr + (c * 4 + r) * Wp;
        row[0] = row[W + 1] = 0.f;
        if (y < 0 || y >= H) std::fill(row + 1, row + 1 + W, 0.f);
        else deinterleave(tmp, W, int(C), int(c), row + 1);
      }
    }
    return finite;
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < 4; ++r) {
      float* row = xr + (c * 4 + r) * Wp;
      const int64_t y = 2 * oh - 1 + r;
      row[0] = row[W + 1] = 0.f;
      if (y < 0 || y >= H) {
        std::fill(row + 1, row + 1 + W, 0.f);
        continue;
      }
      const int64_t at = n * st[0] + c * st[1] + y * st[2];
      if (st[3] == 1) {
        finite &= widen_row(base + at * int64_t(es), dt, W, row + 1) == 0;
      } else {  // a channels-last or strided view: element by element
        for (int64_t x = 0; x < W; ++x) {
          row[1 + x] = float(load_as_double(base, dt, at + x * st[3]));  // exact
          finite &= std::isfinite(row[1 + x]);
        }
      }
    }
  return finite;
}

// A per-thread buffer that only grows (no allocation in a steady-state step).
float* scratch(size_t n) {
  static thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// f32 -> dtype (round to nearest even, NaN kept quiet as half.h does) -> f32: the value the
// composition's convolution would have stored.
MIXPREC_AVX512 inline __m512 round_to(__m512 v, DType dt) {
  if (dt == DType::f32) return v;
  if (dt == DType::f16) return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(int(0xffff0000u))));
}

MIXPREC_AVX512 inline void store_as(void* dst, int64_t i, __m512 v, DType dt) {
  if (dt == DType::f32) return _mm512_storeu_ps(static_cast<float*>(dst) + i, v);
  __m256i h;
  if (dt == DType::f16) h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  else h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));  // v is already bf16-exact
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(dst) + i), h);
}

MIXPREC_AVX512 inline __m512 load_as(const void* src, int64_t i, DType dt) {
  if (dt == DType::f32) return _mm512_loadu_ps(static_cast<const float*>(src) + i);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + i));
  if (dt == DType::f16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 codes (int32 lanes, 0..3 or 255) -> 8 packed bytes: element 2j low nibble, 2j+1 high.
MIXPREC_AVX512 inline void store_codes(uint8_t* dst, __m512i codes) {
  const __m128i b = _mm512_cvtepi32_epi8(codes);
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi16(0x000F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi16(0x00F0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(_mm_or_si128(lo, hi), _mm_setzero_si128()));
}

MIXPREC_AVX512 inline __m512i load_codes(const uint8_t* src) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
}

// One pooled output's OV x 16 channels from its 4 window positions' convolutions: rounded to
// dt, ReLU + max over the window with relu_max_pool.h's rules (start at +0, a strict ">" so
// the first maximum wins, the first NaN beats everything), stored at dst[at..] with their
// codes at arg (at is even: a row starts at an even element).
template <int OV>
MIXPREC_AVX512 inline void pool_window(const __m512 (&acc)[4][OV], DType dt, void* dst, int64_t at, uint8_t* arg) {
#pragma GCC unroll 4
  for (int v = 0; v < OV; ++v) {
    __m512 m = _mm512_setzero_ps();
    __m512i code = _mm512_set1_epi32(255);
    __mmask16 nan_seen = 0;
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m512 y = round_to(acc[p][v], dt);
      const __mmask16 isnan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q) & __mmask16(~nan_seen);
      const __mmask16 gt = _mm512_cmp_ps_mask(y, m, _CMP_GT_OQ) & __mmask16(~nan_seen);
      const __mmask16 take = isnan | gt;
      m = _mm512_mask_mov_ps(m, take, y);
      code = _mm512_mask_mov_epi32(code, take, _mm512_set1_epi32(p));
      nan_seen |= isnan;
    }
    store_as(dst, at + 16 * v, m, dt);
    store_codes(arg + 8 * v, code);
  }
}

// One pooled row: OW outputs x O channels into dst ([OW][O] of dt from dst_at) and its
// codes. OV = O / 16 vectors of channels are computed together, so each broadcast input
// value feeds OV FMAs: 4 window positions x OV accumulators (at most 16 registers).
template <int C, int OV>
MIXPREC_AVX512 void forward_row(const float* xr, int64_t Wp, int64_t OW, const float* wt, const float* bias, DType dt,
                                void* dst, int64_t dst_at, uint8_t* arg) {
  constexpr int64_t O = 16 * OV;
  for (int64_t ow = 0; ow < OW; ++ow) {
    __m512 acc[4][OV];  // window positions (0,0) (0,1) (1,0) (1,1) x channel vectors
#pragma GCC unroll 4
    for (int v = 0; v < OV; ++v) {
      const __m512 b = _mm512_loadu_ps(bias + 16 * v);
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) acc[p][v] = b;
    }
    for (int c = 0; c < C; ++c)
      for (int ky = 0; ky < 3; ++ky) {
        const float* x = xr + (c * 4 + ky) * Wp + 2 * ow;
        for (int kx = 0; kx < 3; ++kx) {
          const float* w = wt + ((c * 3 + ky) * 3 + kx) * O;
          const __m512 x0 = _mm512_set1_ps(x[kx]), x1 = _mm512_set1_ps(x[kx + 1]);
          const __m512 x2 = _mm512_set1_ps(x[Wp + kx]), x3 = _mm512_set1_ps(x[Wp + kx + 1]);
#pragma GCC unroll 4
          for (int v = 0; v < OV; ++v) {
            const __m512 wv = _mm512_loadu_ps(w + 16 * v);
            acc[0][v] = _mm512_fmadd_ps(wv, x0, acc[0][v]);
            acc[1][v] = _mm512_fmadd_ps(wv, x1, acc[1][v]);
            acc[2][v] = _mm512_fmadd_ps(wv, x2, acc[2][v]);
            acc[3][v] = _mm512_fmadd_ps(wv, x3, acc[3][v]);
          }
        }
      }
    pool_window<OV>(acc, dt, dst, dst_at + ow * O, arg + ow * O / 2);
  }
}

// forward_row for bf16 on AVX512-BF16: vdpbf16ps adds two products a lane, so a channel's 9
// taps go as 5 pairs, k = 0..4: the row pairs (ky, kx 0-1) for ky = 0, 1, 2, then (ky 0, kx 2)
// with (ky 1, kx 2), then (ky 2, kx 2) with a zero. w2 holds the weights so paired, [C * 5][O]
// words (first tap in the low half). The inputs of a pair are one 32-bit word broadcast:
// the row pairs straight from the row in bf16 (two neighbouring columns), the others from
// words built here per pooled row (V: rows r, r + 1 of a column; Z: row r + 2 and zero).
// Each pair's two products are exact in f32 and added to the accumulator in turn, as two FMAs
// would, with subnormal operands and results flushed to zero as the instruction does (and
// oneDNN's bf16 convolutions with it).
constexpr int kPairs = 5;

uint32_t* pair_scratch(size_t n) {
  static thread_local std::vector<uint32_t> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

template <int C, int OV>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,f16c"))) void forward_row_bf16(
    const float* xr, int64_t Wp, int64_t OW, const uint32_t* w2, const float* bias, void* dst, int64_t dst_at,
    uint8_t* arg) {
  constexpr int64_t O = 16 * OV;
  // Per channel: H, its 4 rows in bf16 (Wp words' room: 2 Wp halves), then V rows 0-1 and 1-2,
  // then Z rows 2 and 3: 6 Wp words. xr's values are bf16 already (widened exactly).
  const int64_t per_c = 6 * Wp;
  uint32_t* buf = pair_scratch(size_t(C * per_c));
  for (int c = 0; c < C; ++c) {
    uint16_t* H = reinterpret_cast<uint16_t*>(buf + c * per_c);
    uint32_t* V = buf + c * per_c + 2 * Wp;
    uint32_t* Z = V + 2 * Wp;
    for (int r = 0; r < 4; ++r) {
      const float* x = xr + (c * 4 + r) * Wp;
      for (int64_t j = 0; j < Wp; j += 16) {
        const __mmask16 m = lanes16(j, Wp);
        const __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + j)), 16);
        _mm256_mask_storeu_epi16(H + r * Wp + j, m, _mm512_cvtepi32_epi16(bits));
      }
    }
    for (int q = 0; q < 2; ++q)
      for (int64_t j = 0; j < Wp; j += 16) {
        const __mmask16 m = lanes16(j, Wp);
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, H + q * Wp + j));
        const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, H + (q + 1) * Wp + j));
        _mm512_mask_storeu_epi32(V + q * Wp + j, m, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        _mm512_mask_storeu_epi32(Z + q * Wp + j, m,
                                 _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, H + (q + 2) * Wp + j)));
      }
  }
  for (int64_t ow = 0; ow < OW; ++ow) {
    // Every loop here is unrolled (GCC unroll): left as loops, GCC keeps acc in memory.
    __m512 acc[4][OV];  // window positions (0,0) (0,1) (1,0) (1,1) x channel vectors
#pragma GCC unroll 4
    for (int v = 0; v < OV; ++v) {
      const __m512 b = _mm512_loadu_ps(bias + 16 * v);
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) acc[p][v] = b;
    }
#pragma GCC unroll 3
    for (int c = 0; c < C; ++c) {
      const uint16_t* H = reinterpret_cast<const uint16_t*>(buf + c * per_c) + 2 * ow;
      const uint32_t* V = buf + c * per_c + 2 * Wp + 2 * ow + 2;
      const uint32_t* Z = V + 2 * Wp;
#pragma GCC unroll 5
      for (int k = 0; k < kPairs; ++k) {
        __m512bh x[4];  // position p = py * 2 + px
#pragma GCC unroll 2
        for (int py = 0; py < 2; ++py)
#pragma GCC unroll 2
          for (int px = 0; px < 2; ++px) {
            uint32_t word;
            if (k < 3) std::memcpy(&word, H + (py + k) * Wp + px, sizeof word);  // two neighbouring columns
            else word = (k == 3 ? V : Z)[py * Wp + px];
            x[py * 2 + px] = (__m512bh)_mm512_set1_epi32(int(word));
          }
        const uint32_t* w = w2 + (c * kPairs + k) * O;
#pragma GCC unroll 4
        for (int v = 0; v < OV; ++v) {
          const __m512bh wv = (__m512bh)_mm512_loadu_si512(w + 16 * v);
#pragma GCC unroll 4
          for (int p = 0; p < 4; ++p) acc[p][v] = _mm512_dpbf16_ps(acc[p][v], wv, x[p]);
        }
      }
    }
    pool_window<OV>(acc, DType::bf16, dst, dst_at + ow * O, arg + ow * O / 2);
  }
}

// weights [O, C, 3, 3] in bf16 -> forward_row_bf16's pairs: [C * 5][O] words.
const uint32_t* paired_weights(const Tensor& weights) {
  static thread_local std::vector<uint32_t> w2;
  const int64_t O = weights.size(0), C = weights.size(1);
  w2.assign(size_t(C * kPairs * O), 0u);
  const Tensor w = weights.contiguous();
  const uint16_t* bits = static_cast<const uint16_t*>(w.data());
  // Taps (ky, kx) of each pair, low then high; -1: the zero.
  constexpr int kTaps[kPairs][2] = {{0, 1}, {3, 4}, {6, 7}, {2, 5}, {8, -1}};
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int k = 0; k < kPairs; ++k) {
        const uint32_t lo = bits[(o * C + c) * 9 + kTaps[k][0]];
        const uint32_t hi = kTaps[k][1] < 0 ? 0u : bits[(o * C + c) * 9 + kTaps[k][1]];
        w2[size_t((c * kPairs + k) * O + o)] = lo | (hi << 16);
      }
  return w2.data();
}

// The 4x4 input neighbourhood of pooled column ow in channel c (rows 0..3 of xr, padded
// columns 2ow .. 2ow+3), as one vector: element r * 4 + j.
MIXPREC_AVX512 inline __m512 neighbourhood(const float* xr, int64_t Wp, int c, int64_t ow) {
  const float* x = xr + c * 4 * Wp + 2 * ow;
  __m512 n = _mm512_castps128_ps512(_mm_loadu_ps(x));
  n = _mm512_insertf32x4(n, _mm_loadu_ps(x + Wp), 1);
  n = _mm512_insertf32x4(n, _mm_loadu_ps(x + 2 * Wp), 2);
  return _mm512_insertf32x4(n, _mm_loadu_ps(x + 3 * Wp), 3);
}

// One pooled row's weight and bias gradients, added to dw ([t][O]) and db ([O]). Each lane
// (an output channel) sends its gradient to the one window position its argmax names, so
// the input under tap (ky, kx) differs per lane: it is picked from the 4x4 neighbourhood
// with one permute, index (dy + ky) * 4 + (dx + kx). One FMA per tap, where a dense
// backward over the full-resolution gradient would spend four (three on zeros).
template <int C>
MIXPREC_AVX512 void backward_row(const float* xr, int64_t Wp, int64_t OW, int64_t O, const void* g, int64_t g_at,
                                 DType dt, const uint8_t* arg, float* dw, float* db) {
  // One input channel at a time, its 9 taps' accumulators in registers (all 27 of C = 3 and
  // the temporaries would not fit in 32 and GCC kept them in memory, a load and a store per
  // FMA); each tap still sums the row's outputs in the same order, so the bits are the same.
  // The codes, gradients and picks are recomputed per channel: cheap loads against 9 FMAs.
  for (int64_t o = 0; o < O; o += 16) {
    for (int c = 0; c < C; ++c) {
      __m512 acc[9];
#pragma GCC unroll 9
      for (int t = 0; t < 9; ++t) acc[t] = _mm512_loadu_ps(dw + (c * 9 + t) * O + o);
      __m512 accb = _mm512_loadu_ps(db + o);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t e = ow * O + o;
        const __m512i code = load_codes(arg + e / 2);
        const __m512 grad = _mm512_maskz_mov_ps(_mm512_cmpneq_epi32_mask(code, _mm512_set1_epi32(kNone)),
                                                load_as(g, g_at + e, dt));
        if (c == 0) accb = _mm512_add_ps(accb, grad);
        // Window position p = dy * 2 + dx -> its top-left index dy * 4 + dx in the 4x4 block.
        const __m512i base = _mm512_add_epi32(_mm512_slli_epi32(_mm512_srli_epi32(code, 1), 2),
                                              _mm512_and_si512(code, _mm512_set1_epi32(1)));
        const __m512 n = neighbourhood(xr, Wp, c, ow);
#pragma GCC unroll 3
        for (int ky = 0; ky < 3; ++ky)
#pragma GCC unroll 3
          for (int kx = 0; kx < 3; ++kx) {
            const __m512 x = _mm512_permutexvar_ps(_mm512_add_epi32(base, _mm512_set1_epi32(ky * 4 + kx)), n);
            acc[ky * 3 + kx] = _mm512_fmadd_ps(grad, x, acc[ky * 3 + kx]);
          }
      }
#pragma GCC unroll 9
      for (int t = 0; t < 9; ++t) _mm512_storeu_ps(dw + (c * 9 + t) * O + o, acc[t]);
      if (c == 0) _mm512_storeu_ps(db + o, accb);
    }
  }
}

#pragma GCC diagnostic pop

// One pooled row by forward_row_bf16 when w2 (its paired weights: bf16 on AVX512-BF16) is
// given, else by forward_row's FMAs.
template <int C, int OV>
void forward_row_of(const float* xr, int64_t Wp, int64_t OW, const float* wt, const uint32_t* w2, const float* bias,
                    DType dt, void* dst, int64_t dst_at, uint8_t* arg) {
  if (w2 != nullptr) forward_row_bf16<C, OV>(xr, Wp, OW, w2, bias, dst, dst_at, arg);
  else forward_row<C, OV>(xr, Wp, OW, wt, bias, dt, dst, dst_at, arg);
}

// Returns false when src holds inf or NaN (in the rows the pooled output reads).
// w2: forward_row_of's.
template <int C>
bool forward_all(const Tensor& src, const float* wt, const uint32_t* w2, const float* bias, Tensor& dst,
                 uint8_t* arg) {
  const int64_t N = src.size(0), W = src.size(3), Wp = W + 2, O = dst.size(1), OH = dst.size(2), OW = dst.size(3);
  const DType dt = src.dtype();
  void* out = dst.data();
  std::atomic<bool> nonfinite{false};
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < N * OH; ++row) {
    float* xr = scratch(size_t(C * 4 * Wp + C * W));  // rows + a channels-last row
    if (!load_rows(src, row / OH, row % OH, xr)) nonfinite.store(true, std::memory_order_relaxed);
    uint8_t* codes = arg + row * OW * O / 2;
    switch (O / 16) {
      case 1: forward_row_of<C, 1>(xr, Wp, OW, wt, w2, bias, dt, out, row * OW * O, codes); break;
      case 2: forward_row_of<C, 2>(xr, Wp, OW, wt, w2, bias, dt, out, row * OW * O, codes); break;
      case 3: forward_row_of<C, 3>(xr, Wp, OW, wt, w2, bias, dt, out, row * OW * O, codes); break;
      default: forward_row_of<C, 4>(xr, Wp, OW, wt, w2, bias, dt, out, row * OW * O, codes); break;
    }
  }
  return !nonfinite.load();
}

template <int C>
void backward_all(const Tensor& src, const Tensor& g, const uint8_t* arg, int64_t O, float* partials, int threads) {
  const int64_t N = src.size(0), W = src.size(3), Wp = W + 2, OH = g.size(2), OW = g.size(3);
  const int64_t per_thread = C * 9 * O + O;
  const DType dt = g.dtype();
  const void* gd = g.data();
#pragma omp parallel num_threads(threads)
  {
    float* mine = partials + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static)
    for (int64_t row = 0; row < N * OH; ++row) {
      float* xr = scratch(size_t(C * 4 * Wp + C * W));
      load_rows(src, row / OH, row % OH, xr);
      backward_row<C>(xr, Wp, OW, O, gd, row * OW * O, dt, arg + row * OW * O / 2, mine, mine + C * 9 * O);
    }
  }
}

// weights [O, C, 3, 3] (any dtype) -> f32 [t][O].
std::vector<float>& transposed_weights(const Tensor& weights) {
  static thread_local std::vector<float> wt;
  const int64_t O = weights.size(0), T = weights.size(1) * 9;
  wt.resize(size_t(T * O));
  const Tensor w = weights.contiguous();
  const char* base = static_cast<const char*>(w.data());
  for (int64_t o = 0; o < O; ++o)
    for (int64_t t = 0; t < T; ++t) wt[size_t(t * O + o)] = float(load_as_double(base, w.dtype(), o * T + t));
  return wt;
}

}  // namespace

bool conv_relu_max_pool_applies(const Tensor& src, const Tensor& weights, const Tensor& bias, int64_t stride,
                                int64_t padding, int64_t pool) {
  if (!src.defined() || !weights.defined() || src.dim() != 4 || weights.dim() != 4) return false;
  const DType dt = src.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16) return false;
  if (weights.dtype() != dt || (bias.defined() && (bias.dtype() != dt || bias.dim() != 1 ||
                                                   bias.size(0) != weights.size(0))))
    return false;
  const int64_t C = src.size(1), O = weights.size(0);
  return stride == 1 && padding == 1 && pool == 2 && C >= 1 && C <= 3 && weights.size(1) == C &&
         weights.size(2) == 3 && weights.size(3) == 3 && O % 16 == 0 && O >= 16 && O <= 64 && src.size(2) >= 2 &&
         src.size(3) >= 2 && has_avx512();
}

ConvReluPoolResult conv_relu_max_pool_forward(const Tensor& src, const Tensor& weights, const Tensor& bias) {
  if (!conv_relu_max_pool_applies(src, weights, bias, 1, 1, 2))
    bad("conv_relu_max_pool_forward: src " + src.str() + " and weights " + weights.str() + " are not a fused case");
  const int64_t N = src.size(0), C = src.size(1), O = weights.size(0), OH = src.size(2) / 2, OW = src.size(3) / 2;
  const std::vector<float>& wt = transposed_weights(weights);
  const uint32_t* w2 = src.dtype() == DType::bf16 && cpu_features().avx512_bf16 ? paired_weights(weights) : nullptr;
  std::vector<float> b(size_t(O), 0.f);
  if (bias.defined())
    for (int64_t o = 0; o < O; ++o) b[size_t(o)] = float(bias.at(o));
  ConvReluPoolResult r;
  r.dst = Tensor::empty({N, O, OH, OW}, src.dtype(), MemoryFormat::channels_last);
  r.argmax = Tensor::empty({(r.dst.numel() + 1) / 2}, DType::u8);
  uint8_t* arg = r.argmax.data_ptr<uint8_t>();
  switch (C) {
    case 1: r.src_finite = forward_all<1>(src, wt.data(), w2, b.data(), r.dst, arg); break;
    case 2: r.src_finite = forward_all<2>(src, wt.data(), w2, b.data(), r.dst, arg); break;
    default: r.src_finite = forward_all<3>(src, wt.data(), w2, b.data(), r.dst, arg); break;
  }
  // (Pooled row oh reads input rows 2oh-1 .. 2oh+2, all columns: every input value is
  // checked, an odd H's last row included.)
  return r;
}

ConvReluPoolGrads conv_relu_max_pool_backward_weights(const Tensor& src, const Tensor& diff_dst_in,
                                                      const Tensor& argmax, const Shape& weights_shape,
                                                      bool with_bias) {
  const int64_t C = src.size(1), O = weights_shape[0], T = C * 9;
  const Tensor g = diff_dst_in.to(src.dtype()).to_memory_format(MemoryFormat::channels_last);
  if (g.dim() != 4 || g.size(0) != src.size(0) || g.size(1) != O || g.size(2) != src.size(2) / 2 ||
      g.size(3) != src.size(3) / 2 || argmax.numel() != (g.numel() + 1) / 2)
    bad("conv_relu_max_pool_backward_weights: diff_dst " + g.str() + " does not fit src " + src.str());
  const int threads = omp_get_max_threads();
  const int64_t per_thread = T * O + O;
  static thread_local std::vector<float> partials;
  partials.assign(size_t(per_thread * threads), 0.f);
  switch (C) {
    case 1: backward_all<1>(src, g, argmax.data_ptr<uint8_t>(), O, partials.data(), threads); break;
    case 2: backward_all<2>(src, g, argmax.data_ptr<uint8_t>(), O, partials.data(), threads); break;
    default: backward_all<3>(src, g, argmax.data_ptr<uint8_t>(), O, partials.data(), threads); break;
  }
  ConvReluPoolGrads out;
  out.diff_weights = Tensor::empty({O, C, 3, 3}, DType::f32);
  float* dw = out.diff_weights.data_ptr<float>();
  std::vector<float> sum(size_t(per_thread), 0.f);
  for (int th = 0; th < threads; ++th)
    for (int64_t i = 0; i < per_thread; ++i) sum[size_t(i)] += partials[size_t(th * per_thread + i)];
  for (int64_t o = 0; o < O; ++o)
    for (int64_t t = 0; t < T; ++t) dw[o * T + t] = sum[size_t(t * O + o)];
  if (with_bias) {
    out.diff_bias = Tensor::empty({O}, DType::f32);
    std::copy_n(sum.data() + T * O, O, out.diff_bias.data_ptr<float>());
  }
  return out;
}

}  // namespace mixprec::backend::cpu
