// unscale_kernel.cpp: one pass per gradient that unscales and counts inf/NaN.
// This file must never be built with -ffast-math / -ffinite-math-only: the compiler
// would be allowed to assume no inf/NaN exist and delete the check. The test
// GradScaler.InfInOneElementIsFound fails if that happens.
#include "amp/unscale_kernel.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.h"
#include "core/tensor_impl.h"
#include "mixprec/status.h"

#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "unscale_kernel.cpp must be compiled without fast-math: it checks for inf/NaN"
#endif

namespace mixprec::amp {

namespace {

// Bit test rather than std::isfinite: immune to any finite-math assumption. An f32 is
// inf/NaN exactly when its 8 exponent bits are all ones.
inline bool nonfinite_f32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return (bits & 0x7f800000u) == 0x7f800000u;
}

template <typename T>
UnscaleResult unscale_loop(T* g, int64_t n, T inv) {
  UnscaleResult r;
  int64_t count = 0;
  int64_t first = n;
#pragma omp parallel for reduction(+ : count) reduction(min : first) if (n > 200000)
  for (int64_t i = 0; i < n; ++i) {
    const T v = g[i];
    bool bad;
    if constexpr (sizeof(T) == 4) {
      bad = nonfinite_f32(v);
    } else {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      bad = (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
    }
    if (bad) {
      ++count;
      if (i < first) first = i;
    }
    g[i] = v * inv;
  }
  r.nonfinite = count;
  r.first_index = count ? first : -1;
  return r;
}

}  // namespace

UnscaleResult unscale_and_check(Tensor& grad, float inv_scale) {
  MIXPREC_CHECK(grad.is_dense(), "gradients are dense");
  const int64_t n = grad.numel();
  UnscaleResult r;
  switch (grad.dtype()) {
    case DType::f32: r = unscale_loop<float>(grad.data_ptr<float>(), n, inv_scale); break;
    case DType::f64: r = unscale_loop<double>(grad.data_ptr<double>(), n, double(inv_scale)); break;
    case DType::bf16:
    case DType::f16: {
      // Widen, unscale in f32, round back: one rounding, as PyTorch's kernel does.
      std::vector<float> tmp(static_cast<size_t>(n));
      convert_elements(grad.data(), grad.dtype(), tmp.data(), DType::f32, n);
      r = unscale_loop<float>(tmp.data(), n, inv_scale);
      convert_elements(tmp.data(), DType::f32, grad.data(), grad.dtype(), n);
      break;
    }
    default:
      throw Error(Status::invalid_argument("unscale: gradient must be floating, got " + grad.str()));
  }
  grad.storage()->bump_version();
  return r;
}

}  // namespace mixprec::amp
