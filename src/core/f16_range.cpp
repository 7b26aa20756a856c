// f16_range.cpp: the bulk count of include/mixprec/core/f16_range.h. Tiles of kTile elements are
// widened to f32 on the stack (16-bit) and classified with the thresholds of f16_range():
// as bit ranges at scale 1, in double after any other scale. Tiles are split over the OpenMP
// threads with a static schedule and the counts add up, so the result is the same on any
// thread count. Order does not matter (a count per class), so the buffer is read in storage
// order: t must be dense (channels-last included).
// Like nonfinite_scan.cpp, never built with finite-math: the NaN/inf class would vanish.
#include "mixprec/core/f16_range.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "mixprec/core/status.h"

#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "f16_range.cpp must be compiled without fast-math: it counts inf/NaN"
#endif

namespace mixprec {

namespace {

constexpr int64_t kTile = 4096;
constexpr int64_t kParallelMin = 128 * 1024;

// The thresholds as f32 bit patterns of |x| (positive floats order as their bits): the fast
// path, for f32 and widened 16-bit values at scale 1 (every gradient train counts). Each class
// is one unsigned range test, `b - lo < hi - lo`, so the loop vectorizes (as nonfinite_scan's
// does: `omp simd`, lanes of uint32, n <= kTile).
constexpr uint32_t kFlushedMaxBits = 0x33000000u;  // 2^-25
constexpr uint32_t kMinNormalBits = 0x38800000u;   // 2^-14
constexpr uint32_t kOverflowBits = 0x477ff000u;    // 65520
constexpr uint32_t kInfBits = 0x7f800000u;
static_assert(kF16FlushedMax == 0x1p-25 && kF16MinNormal == 0x1p-14 && kF16OverflowFrom == 65520.0,
              "the bit patterns above are f16_range.h's thresholds");

void count_f32_bits(const float* x, int64_t n, F16RangeCounts& c) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(x);
  uint32_t flushed = 0, subnormal = 0, overflow = 0, nonfinite = 0;
#pragma omp simd reduction(+ : flushed, subnormal, overflow, nonfinite)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, bytes + i * 4, 4);
    b &= 0x7fffffffu;
    flushed += uint32_t(b - 1u < kFlushedMaxBits);  // 0 < |x| <= 2^-25 (0 wraps to the top)
    subnormal += uint32_t(b - (kFlushedMaxBits + 1u) < kMinNormalBits - (kFlushedMaxBits + 1u));
    overflow += uint32_t(b - kOverflowBits < kInfBits - kOverflowBits);
    nonfinite += uint32_t(b >= kInfBits);
  }
  c.flushed += flushed;
  c.subnormal += subnormal;
  c.overflow += overflow;
  c.nonfinite += nonfinite;
}

// Any scale, and f64: x * s in double (exact for an f32 x and scale) through f16_range().
template <typename T>
void count_scaled(const T* x, int64_t n, double s, F16RangeCounts& c) {
  for (int64_t i = 0; i < n; ++i) {
    switch (f16_range(double(x[i]) * s)) {
      case F16Range::flushed: ++c.flushed; break;
      case F16Range::subnormal: ++c.subnormal; break;
      case F16Range::overflow: ++c.overflow; break;
      case F16Range::nonfinite: ++c.nonfinite; break;
      case F16Range::zero:
      case F16Range::normal: break;
    }
  }
}

void count_range(const char* base, DType dtype, int64_t begin, int64_t len, double s, F16RangeCounts& c) {
  if (dtype == DType::f64) return count_scaled(reinterpret_cast<const double*>(base) + begin, len, s, c);
  const float* x = reinterpret_cast<const float*>(base) + begin;
  alignas(64) float tmp[kTile];
  if (dtype != DType::f32) {  // bf16/f16 widen exactly to f32
    convert_elements(base + begin * int64_t(dtype_size(dtype)), dtype, tmp, DType::f32, len);
    x = tmp;
  }
  if (s == 1.0) count_f32_bits(x, len, c);
  else count_scaled(x, len, s, c);
}

}  // namespace

F16RangeCounts count_f16_range(const Tensor& t, float scale) {
  const DType d = t.dtype();
  if (d != DType::f32 && d != DType::f64 && d != DType::bf16 && d != DType::f16)
    throw Error(Status::invalid_argument("count_f16_range: expected a floating tensor, got " + t.str()));
  if (!t.is_dense())
    throw Error(Status::invalid_argument("count_f16_range: expected a dense tensor (a view with gaps: call "
                                         ".contiguous() first), got " + t.str()));
  const int64_t n = t.numel();
  const char* base = static_cast<const char*>(t.data());
  const double s = double(scale);
  const int64_t tiles = (n + kTile - 1) / kTile;
  const bool parallel = n >= kParallelMin && omp_get_max_threads() > 1 && !omp_in_parallel();
  int64_t flushed = 0, subnormal = 0, overflow = 0, nonfinite = 0;
#pragma omp parallel for schedule(static) reduction(+ : flushed, subnormal, overflow, nonfinite) if (parallel)
  for (int64_t k = 0; k < tiles; ++k) {
    F16RangeCounts c;
    const int64_t begin = k * kTile;
    count_range(base, d, begin, std::min(kTile, n - begin), s, c);
    flushed += c.flushed;
    subnormal += c.subnormal;
    overflow += c.overflow;
    nonfinite += c.nonfinite;
  }
  F16RangeCounts out;
  out.values = n;
  out.flushed = flushed;
  out.subnormal = subnormal;
  out.overflow = overflow;
  out.nonfinite = nonfinite;
  return out;
}

}  // namespace mixprec
