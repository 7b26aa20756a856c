// f16_range.h: what float16 does to a value, the one definition that `mixprec inspect` (a
// checkpoint's tensors) and train's underflow telemetry (a step's scaled gradients) share:
//   flushed    0 < |x| <= 2^-25    rounds to 0 in f16 (2^-25 is the tie, which goes to the even 0;
//                                  just above it rounds up to 2^-24, the smallest subnormal)
//   subnormal  2^-25 < |x| < 2^-14 survives only as an f16 subnormal (fewer mantissa bits)
//   overflow   65520 <= |x| < inf  rounds to inf (65504 is the largest finite f16; values
//                                  below 65520 round down to it)
// inf and NaN are their own class (already non-finite), and 0 is 0.
#pragma once
#include <cmath>
#include <cstdint>

#include "mixprec/core/tensor.h"

namespace mixprec {

inline constexpr double kF16FlushedMax = 0x1p-25;  // largest |x| that rounds to 0
inline constexpr double kF16MinNormal = 0x1p-14;
inline constexpr double kF16OverflowFrom = 65520.0;  // smallest |x| that rounds to inf

enum class F16Range : uint8_t { zero, flushed, subnormal, normal, overflow, nonfinite };

inline F16Range f16_range(double x) {
  if (std::isnan(x) || std::isinf(x)) return F16Range::nonfinite;
  const double a = std::fabs(x);
  if (a == 0) return F16Range::zero;
  if (a <= kF16FlushedMax) return F16Range::flushed;
  if (a < kF16MinNormal) return F16Range::subnormal;
  if (a >= kF16OverflowFrom) return F16Range::overflow;
  return F16Range::normal;
}

struct F16RangeCounts {
  int64_t values = 0;  // elements looked at
  int64_t flushed = 0, subnormal = 0, overflow = 0, nonfinite = 0;
};

// Counts t's elements (f32, f64, bf16, f16; dense) by f16_range(x * scale), the product taken
// in double (exact for an f32 scale): how a gradient computed at that loss scale would fare
// in f16. A tensor that is already f16 has no flushed values (they are zeros by now). One
// read pass, split over the OpenMP threads for large tensors; the counts do not depend on
// the thread count. Other dtypes, and a view with gaps (not dense): invalid_argument.
F16RangeCounts count_f16_range(const Tensor& t, float scale = 1.0f);

}  // namespace mixprec
