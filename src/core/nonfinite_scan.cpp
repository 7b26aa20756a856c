// nonfinite_scan.cpp: one pass per gradient that unscales and counts inf/NaN, and the
// read-only count. Tiles of kTile elements are split over the OpenMP threads with a static
// schedule; counts add up and the first index is a min, so the report is the same on any
// thread count. 16-bit gradients are widened per tile on the stack (no heap buffer).
// This file must never be built with -ffast-math / -ffinite-math-only: the compiler
// would be allowed to assume no inf/NaN exist and delete the check. The test
// GradScaler.InfInOneElementIsFound fails if that happens.
#include "core/nonfinite_scan.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "core/tensor_impl.h"
#include "mixprec/core/status.h"

#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "nonfinite_scan.cpp must be compiled without fast-math: it checks for inf/NaN"
#endif

namespace mixprec {

namespace {

constexpr int64_t kTile = 4096;
constexpr int64_t kParallelMin = 128 * 1024;

// Bit tests rather than std::isfinite: immune to any finite-math assumption. A value is
// inf/NaN exactly when its exponent bits are all ones.
template <typename Bits>
constexpr Bits exponent_mask() {
  if constexpr (sizeof(Bits) == 8) return Bits(0x7ff0000000000000ull);
  else return Bits(0x7f800000u);
}
constexpr uint16_t kBf16Exponent = 0x7f80, kF16Exponent = 0x7c00;

// Non-finite elements among n raw values (Bits: the storage's unsigned type).
// `omp simd`: at -O2 GCC 12 only vectorizes loops that need no scalar epilogue, and this
// check must run at memory speed. n <= kTile, so the count fits the lanes' element type.
template <typename Bits>
int64_t count_bad(const void* base, int64_t n, Bits mask) {
  const unsigned char* bytes = static_cast<const unsigned char*>(base);
  Bits count = 0;
#pragma omp simd reduction(+ : count)
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, bytes + i * int64_t(sizeof(Bits)), sizeof(Bits));
    count += Bits((b & mask) == mask);
  }
  return int64_t(count);
}

template <typename Bits>
int64_t first_bad(const void* base, int64_t n, Bits mask) {
  const unsigned char* bytes = static_cast<const unsigned char*>(base);
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, bytes + i * int64_t(sizeof(Bits)), sizeof(Bits));
    if ((b & mask) == mask) return i;
  }
  return n;
}

// Counts the non-finite elements of [begin, begin + len) (lowering `first` to the first one
// found) and, when `write`, multiplies them by inv. The count comes from the values before
// scaling: with a scale below 1, inv > 1 could turn a large finite value into inf.
template <typename Bits>
int64_t tile_pass(void* data, DType dtype, Bits mask, int64_t begin, int64_t len, bool write, float inv,
                  int64_t& first) {
  char* base = static_cast<char*>(data) + begin * int64_t(sizeof(Bits));
  const int64_t count = count_bad<Bits>(base, len, mask);
  if (count) first = std::min(first, begin + first_bad<Bits>(base, len, mask));
  if (!write) return count;
  if (dtype == DType::f32) {
    float* g = reinterpret_cast<float*>(base);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) g[i] = g[i] * inv;
  } else if (dtype == DType::f64) {
    double* g = reinterpret_cast<double*>(base);
    const double inv64 = double(inv);
    for (int64_t i = 0; i < len; ++i) g[i] = g[i] * inv64;
  } else {
    // Widen, unscale in f32, round back: one rounding, as PyTorch's kernel does.
    alignas(64) float tmp[kTile];
    convert_elements(base, dtype, tmp, DType::f32, len);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) tmp[i] = tmp[i] * inv;
    convert_elements(tmp, DType::f32, base, dtype, len);
  }
  return count;
}

template <typename Bits>
UnscaleResult run(void* data, DType dtype, int64_t n, Bits mask, bool write, float inv) {
  int64_t count = 0, first = n;
  const int64_t tiles = (n + kTile - 1) / kTile;
  const bool parallel = n >= kParallelMin && omp_get_max_threads() > 1 && !omp_in_parallel();
#pragma omp parallel for schedule(static) reduction(+ : count) reduction(min : first) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t begin = t * kTile;
    count += tile_pass<Bits>(data, dtype, mask, begin, std::min(kTile, n - begin), write, inv, first);
  }
  UnscaleResult r;
  r.nonfinite = count;
  r.first_index = count ? first : -1;
  return r;
}

UnscaleResult dispatch(void* data, DType dtype, int64_t n, bool write, float inv, const char* op,
                       const Tensor& grad) {
  switch (dtype) {
    case DType::f32: return run<uint32_t>(data, dtype, n, exponent_mask<uint32_t>(), write, inv);
    case DType::f64: return run<uint64_t>(data, dtype, n, exponent_mask<uint64_t>(), write, inv);
    case DType::bf16: return run<uint16_t>(data, dtype, n, kBf16Exponent, write, inv);
    case DType::f16: return run<uint16_t>(data, dtype, n, kF16Exponent, write, inv);
    default:
      throw Error(Status::invalid_argument(std::string(op) + ": gradient must be floating, got " + grad.str()));
  }
}

}  // namespace

UnscaleResult unscale_and_check(Tensor& grad, float inv_scale) {
  MIXPREC_CHECK(grad.is_dense(), "gradients are dense");
  UnscaleResult r = dispatch(grad.data(), grad.dtype(), grad.numel(), true, inv_scale, "unscale", grad);
  grad.storage()->bump_version();
  return r;
}

UnscaleResult find_nonfinite(const Tensor& grad) {
  MIXPREC_CHECK(grad.is_dense(), "gradients are dense");
  return dispatch(const_cast<void*>(grad.data()), grad.dtype(), grad.numel(), false, 1.0f,
                  "inf/NaN check", grad);
}

}  // namespace mixprec
