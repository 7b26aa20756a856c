// backend/cpu/column_sum.cpp: see column_sum.h. The column loop is innermost and
// contiguous (omp simd), built for AVX-512 when the CPU has it (16 lanes instead of the
// baseline's 4). The transposing form lives here too because its sums must repeat
// sum_columns' order exactly (per column: rows in order within chunks of kRows from 0.0f,
// then the chunk sums in order onto 0.0f); it holds a chunk's sum and the running total in
// registers instead of the partial buffer, which is the same sequence of f32 adds.
#include "backend/cpu/column_sum.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "backend/cpu/tail_mask.h"
#include "backend/cpu/transpose16.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu {
namespace {

// Work items are (chunk of kRows rows) x (block of kCols columns): enough items for every
// thread even when the matrix is narrow (a [4096, 256] bias gradient is 16 items), and a
// block's kCols f32 accumulators stay in registers. Each item writes its partial sums;
// the partials of a column are then added in chunk order, so the result depends only on
// the shape, not on the thread count.
constexpr int64_t kRows = 256;
constexpr int64_t kCols = 256;

inline float widen(float v) { return v; }
inline float widen(uint16_t bf16_bits) { return std::bit_cast<float>(uint32_t(bf16_bits) << 16); }

template <typename T>
MIXPREC_ALWAYS_INLINE void sum_columns(const T* x, float* out, int64_t rows,
                                                       int64_t cols) {
  const int64_t chunks = (rows + kRows - 1) / kRows, blocks = (cols + kCols - 1) / kCols;
  std::vector<float> partial(size_t(chunks * cols));
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t item = 0; item < chunks * blocks; ++item) {
    const int64_t chunk = item / blocks, c0 = (item % blocks) * kCols;
    const int64_t width = std::min(kCols, cols - c0);
    const int64_t r0 = chunk * kRows, r1 = std::min(rows, r0 + kRows);
    float acc[kCols] = {};
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * cols + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) acc[c] += widen(row[c]);
    }
    float* p = partial.data() + chunk * cols + c0;
    for (int64_t c = 0; c < width; ++c) p[c] = acc[c];
  }
  for (int64_t c = 0; c < cols; ++c) out[c] = 0.0f;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const float* p = partial.data() + chunk * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] += p[c];
  }
}

template <typename T>
__attribute__((target("avx512f"))) void sum_columns_avx512(const T* x, float* out, int64_t rows,
                                                           int64_t cols) {
  sum_columns(x, out, rows, cols);
}
template <typename T>
void sum_columns_baseline(const T* x, float* out, int64_t rows, int64_t cols) {
  sum_columns(x, out, rows, cols);
}

template <typename T>
void dispatch(const T* x, float* out, int64_t rows, int64_t cols) {
  (cpu_features().avx512f ? sum_columns_avx512<T> : sum_columns_baseline<T>)(x, out, rows, cols);
}


// ---- transpose_with_column_sums ----
// Work items are blocks of kTile columns of x (rows of x^T), all rows each, so that a column's
// sum stays with one thread and in row order; a tile of kTile rows never straddles a kRows
// chunk (kRows is a multiple of kTile).
constexpr int64_t kTile = 16;
static_assert(kRows % kTile == 0);

template <typename T>
void transpose_sums_baseline(const T* x, T* xt, int64_t ld, float* sums, int64_t rows, int64_t cols) {
  const int64_t blocks = (cols + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kTile, width = std::min(kTile, cols - c0);
    float total[kTile] = {}, acc[kTile];
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t r1 = std::min(rows, r0 + kRows);
      for (int64_t c = 0; c < width; ++c) acc[c] = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = x + r * cols + c0;
        for (int64_t c = 0; c < width; ++c) {
          acc[c] += widen(row[c]);
          xt[(c0 + c) * ld + r] = row[c];
        }
      }
      for (int64_t c = 0; c < width; ++c) total[c] += acc[c];
    }
    if (sums)
      for (int64_t c = 0; c < width; ++c) sums[c0 + c] = total[c];
  }
}

// GCC 12 builds the shuffles on _mm512_undefined_ps(), which -W(maybe-)uninitialized reports
// at each inlined use: a known false positive (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define MIXPREC_AVX512_TS __attribute__((target("avx512f,avx512bw,avx512vl")))

// f32: 16 x 16 tiles, each row a vector, transposed in registers (kFullRows/kFullCols as for
// bf16_tile below).
template <bool kFullRows, bool kFullCols>
MIXPREC_ALWAYS_INLINE MIXPREC_AVX512_TS void f32_tile(const float* x, float* xt, int64_t ld, __m512& acc, int64_t t0,
                                                      int64_t height, int64_t rows, int64_t cols, int64_t c0,
                                                      int64_t width, __mmask16 cmask) {
  __m512 tile[kTile];
  #pragma GCC unroll 16
  for (int64_t i = 0; i < kTile; ++i) {
    // Rows in order into the chunk's sum (only real rows: adding a zero row would turn a
    // -0.0f sum into +0.0f, which column_sums_f32 never does).
    if (kFullRows || i < height) {
      const float* src = x + (t0 + i) * cols + c0;
      tile[i] = kFullCols ? _mm512_loadu_ps(src) : _mm512_maskz_loadu_ps(cmask, src);
      acc = _mm512_add_ps(acc, tile[i]);
    } else {
      tile[i] = _mm512_setzero_ps();
    }
  }
  transpose16x16(tile);
  const __mmask16 rmask = lanes16(t0, rows);
  #pragma GCC unroll 16
  for (int64_t c = 0; c < kTile; ++c) {
    float* dst = xt + (c0 + c) * ld + t0;
    if (kFullRows && kFullCols)
      _mm512_storeu_ps(dst, tile[c]);
    else if (kFullCols || c < width)
      _mm512_mask_storeu_ps(dst, rmask, tile[c]);
  }
}

MIXPREC_AVX512_TS void transpose_sums_avx512(const float* x, float* xt, int64_t ld, float* sums, int64_t rows,
                                             int64_t cols) {
  const int64_t blocks = (cols + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kTile, width = std::min(kTile, cols - c0);
    const __mmask16 cmask = lanes16(c0, cols);
    __m512 total = _mm512_setzero_ps();
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t r1 = std::min(rows, r0 + kRows);
      __m512 acc = _mm512_setzero_ps();
      int64_t t0 = r0;
      for (; t0 + kTile <= r1; t0 += kTile) {
        if (width == kTile)
          f32_tile<true, true>(x, xt, ld, acc, t0, kTile, rows, cols, c0, width, cmask);
        else
          f32_tile<true, false>(x, xt, ld, acc, t0, kTile, rows, cols, c0, width, cmask);
      }
      if (t0 < r1) f32_tile<false, false>(x, xt, ld, acc, t0, r1 - t0, rows, cols, c0, width, cmask);
      total = _mm512_add_ps(total, acc);
    }
    if (sums) _mm512_mask_storeu_ps(sums + c0, cmask, total);
  }
}

// bf16: tiles of 32 rows x 16 columns. Rows 2p and 2p+1 are interleaved into one vector of 16
// (row 2p, row 2p+1) pairs, so the 32-bit 16 x 16 transpose of the 16 pair vectors gives each
// column's 32 rows in order, one 64-byte store; the same pair vector, shifted or masked, is the
// two rows widened to f32 for the sums. The 256-bit unpacks leave the columns in the lane
// order kPairLane (0-3, 8-11, 4-7, 12-15), undone at the stores.
constexpr int kPairLane[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

template <bool kFullCols>
MIXPREC_ALWAYS_INLINE MIXPREC_AVX512_TS __m256i bf16_row(const uint16_t* p, __mmask16 m) {
  return kFullCols ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(m, p);
}

// kFullRows: all 32 rows; kFullCols: all 16 columns. Masked loads and stores only at the
// edges, so that the whole tile's case is branch-free.
template <bool kFullRows, bool kFullCols>
MIXPREC_ALWAYS_INLINE MIXPREC_AVX512_TS void bf16_tile(const uint16_t* x, uint16_t* xt, int64_t ld, __m512& acc, int64_t t0,
                                                       int64_t height, int64_t rows, int64_t cols, int64_t c0,
                                                       int64_t width, __mmask16 cmask) {
  const __m512i high = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  __m512 tile[16];
  #pragma GCC unroll 16
  for (int64_t p = 0; p < 16; ++p) {
    const int64_t ra = t0 + 2 * p;
    const bool has_a = kFullRows || 2 * p < height, has_b = kFullRows || 2 * p + 1 < height;
    const __m256i a = has_a ? bf16_row<kFullCols>(x + ra * cols + c0, cmask) : _mm256_setzero_si256();
    const __m256i b = has_b ? bf16_row<kFullCols>(x + (ra + 1) * cols + c0, cmask) : _mm256_setzero_si256();
    const __m512i pair = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi16(a, b)),
                                            _mm256_unpackhi_epi16(a, b), 1);
    // Only real rows enter the sums (a zero row would turn a -0.0f sum into +0.0f).
    if (has_a) acc = _mm512_add_ps(acc, _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16)));
    if (has_b) acc = _mm512_add_ps(acc, _mm512_castsi512_ps(_mm512_and_si512(pair, high)));
    tile[p] = _mm512_castsi512_ps(pair);
  }
  transpose16x16(tile);
  const __mmask32 rmask = rows - t0 >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << (rows - t0)) - 1u);
  #pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    const int c = kPairLane[j];
    uint16_t* dst = xt + (c0 + c) * ld + t0;
    if (kFullRows && kFullCols)
      _mm512_storeu_si512(dst, _mm512_castps_si512(tile[j]));
    else if (kFullCols || c < width)
      _mm512_mask_storeu_epi16(dst, rmask, _mm512_castps_si512(tile[j]));
  }
}

// Rows r0 .. r1 (one chunk) of the 16 columns from c0 into acc, 32 at a time.
template <bool kFullCols>
MIXPREC_ALWAYS_INLINE MIXPREC_AVX512_TS void bf16_chunk(const uint16_t* x, uint16_t* xt, int64_t ld, __m512& acc,
                                                        int64_t r0, int64_t r1, int64_t rows, int64_t cols,
                                                        int64_t c0, int64_t width, __mmask16 cmask) {
  int64_t t0 = r0;
  for (; t0 + 32 <= r1; t0 += 32) bf16_tile<true, kFullCols>(x, xt, ld, acc, t0, 32, rows, cols, c0, width, cmask);
  if (t0 < r1) bf16_tile<false, false>(x, xt, ld, acc, t0, r1 - t0, rows, cols, c0, width, cmask);
}

MIXPREC_AVX512_TS void transpose_sums_avx512(const uint16_t* x, uint16_t* xt, int64_t ld, float* sums,
                                             int64_t rows, int64_t cols) {
  static_assert(kRows % 32 == 0);
  // Items of two tiles' columns (32 bf16: a 64-byte line of each row); within a chunk of
  // kRows rows the second tile's reads hit the lines the first brought into L1.
  const int64_t blocks = (cols + 2 * kTile - 1) / (2 * kTile);
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * 2 * kTile;
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t r1 = std::min(rows, r0 + kRows);
      for (int h = 0; h < 2; ++h) {
        const int64_t ch = c0 + h * kTile, width = std::min(kTile, cols - ch);
        if (width <= 0) break;
        const __mmask16 cmask = lanes16(ch, cols);
        __m512 acc = _mm512_setzero_ps();  // lanes in kPairLane order
        if (width == kTile)
          bf16_chunk<true>(x, xt, ld, acc, r0, r1, rows, cols, ch, width, cmask);
        else
          bf16_chunk<false>(x, xt, ld, acc, r0, r1, rows, cols, ch, width, cmask);
        total[h] = _mm512_add_ps(total[h], acc);
      }
    }
    if (sums) {
      // kPairLane is its own inverse: column c's sum is in lane kPairLane[c].
      const __m512i lane_of = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
      for (int h = 0; h < 2 && c0 + h * kTile < cols; ++h)
        _mm512_mask_storeu_ps(sums + c0 + h * kTile, lanes16(c0 + h * kTile, cols), _mm512_permutexvar_ps(lane_of, total[h]));
    }
  }
}

#pragma GCC diagnostic pop

template <typename T>
void transpose_sums(const T* x, T* xt, int64_t ld, float* sums, int64_t rows, int64_t cols) {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl)
    transpose_sums_avx512(x, xt, ld, sums, rows, cols);
  else
    transpose_sums_baseline(x, xt, ld, sums, rows, cols);
}

void check_input(const char* op, const Tensor& x) {
  if (x.dim() != 2 || !x.is_contiguous() || (x.dtype() != DType::f32 && x.dtype() != DType::bf16))
    throw Error(Status::invalid_argument(std::string(op) + ": expected a contiguous 2-D f32 or bf16 "
                                         "matrix, got " + std::string(dtype_name(x.dtype())) +
                                         " " + shape_str(x.shape())));
}

}  // namespace

Tensor column_sums_f32(const Tensor& x) {
  check_input("column_sums_f32", x);
  const int64_t rows = x.size(0), cols = x.size(1);
  Tensor out = Tensor::empty({cols}, DType::f32);
  float* o = static_cast<float*>(out.data());
  if (x.dtype() == DType::f32)
    dispatch(static_cast<const float*>(x.data()), o, rows, cols);
  else
    dispatch(static_cast<const uint16_t*>(x.data()), o, rows, cols);
  return out;
}

TransposeWithSums transpose_with_column_sums(const Tensor& x, bool sums) {
  check_input("transpose_with_column_sums", x);
  const int64_t rows = x.size(0), cols = x.size(1);
  TransposeWithSums out;
  // Not padded: rows of x^T 4 KiB apart (N = 2048 bf16) share L1 sets, and 64 bytes more per
  // row made this pass ~11% faster (bf16 [2048, 384]: 0.102 -> 0.091 ms), but oneDNN's product
  // on the padded A slower by more (gpt-tiny's shapes lost the route's 3-6%). The kernels
  // still take the distance ld.
  const int64_t ld = rows;
  out.transposed = Tensor::empty({cols, rows}, x.dtype());
  if (sums) out.sums = Tensor::empty({cols}, DType::f32);
  float* s = sums ? static_cast<float*>(out.sums.data()) : nullptr;
  if (rows == 0) {  // nothing to move; the sums of no rows are 0
    if (s) std::fill(s, s + cols, 0.0f);
    return out;
  }
  if (x.dtype() == DType::f32)
    transpose_sums(static_cast<const float*>(x.data()), static_cast<float*>(out.transposed.data()), ld, s,
                   rows, cols);
  else
    transpose_sums(static_cast<const uint16_t*>(x.data()), static_cast<uint16_t*>(out.transposed.data()),
                   ld, s, rows, cols);
  return out;
}

}  // namespace mixprec::backend::cpu
