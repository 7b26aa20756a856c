// tests/unit/backend/onednn_test_util.h: helpers for the backend tests in onednn/ and cpu/: random inputs
// and a dtype-aware comparison of backend::onednn results against backend::ref run in f64.
//
// Tolerances (an element passes if |x - ref| <= rtol * |ref| + atol):
// - f32 (f32_tol(K)): rtol 1e-5 (~80 f32 ulps: oneDNN sums in another order and blocks of
//   FMAs, each rounding at 2^-24), atol 1e-6 * sqrt(K) for a reduction of K products of
//   O(1) terms, whose rounding error grows like eps * sqrt(K) for random signs.
// - bf16 (bf16_tol(K)): the reference runs on the same bf16 values in f64, so the only
//   errors are oneDNN's f32 accumulation (as above) and one final rounding to bf16
//   (<= 2^-9 relative): rtol 2^-8 (2x margin), atol 2^-8 * 1e-2 * sqrt(K) for results that
//   cancel to near zero before rounding.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::test {

struct Tol {
  double rtol, atol;
};
inline Tol f32_tol(int64_t k) { return {1e-5, 1e-6 * std::sqrt(static_cast<double>(k))}; }
inline Tol bf16_tol(int64_t k) {
  return {std::ldexp(1.0, -8), std::ldexp(1.0, -8) * 1e-2 * std::sqrt(static_cast<double>(k))};
}
inline Tol tol_for(DType d, int64_t k) { return d == DType::bf16 ? bf16_tol(k) : f32_tol(k); }

// Uniform [lo, hi) values from a fixed seed, rounded once to dtype, in `format`.
inline Tensor random_input(const Shape& shape, DType dtype, uint64_t seed,
                           MemoryFormat format = MemoryFormat::contiguous, double lo = -1.0,
                           double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = dist(rng);
  Tensor t = Tensor::from_vector_f64(v, shape, dtype);
  return format == MemoryFormat::contiguous ? t : t.to_memory_format(format);
}

// The exact f64 copy of t (bf16 and f32 values are all representable), for backend::ref.
inline Tensor f64(const Tensor& t) { return t.defined() ? t.to(DType::f64) : t; }

// Compares logical values; prints the worst element. Fails as "test too weak" when more
// than 90% of the reference is zero or non-finite (a comparison that passes trivially).
inline ::testing::AssertionResult close_to_ref(const Tensor& actual, const Tensor& ref, Tol tol) {
  if (!actual.defined() || !ref.defined())
    return ::testing::AssertionFailure() << (actual.defined() ? "reference" : "actual") << " tensor is undefined";
  if (actual.numel() == 0 || ref.numel() == 0)
    return ::testing::AssertionFailure() << "nothing to compare: " << actual.numel() << " actual, " << ref.numel()
                                         << " reference elements";
  if (actual.shape() != ref.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs ref "
                                         << shape_str(ref.shape());
  const std::vector<double> a = actual.to_vector_f64();
  const std::vector<double> r = ref.to_vector_f64();
  size_t trivial = 0, worst = 0;
  double worst_excess = -1.0, max_abs = 0.0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] == 0.0 || !std::isfinite(r[i])) ++trivial;
    const double err = std::fabs(a[i] - r[i]);
    if (!(err == err)) return ::testing::AssertionFailure() << "element " << i << " is NaN";
    max_abs = std::max(max_abs, err);
    const double excess = err - (tol.rtol * std::fabs(r[i]) + tol.atol);
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (r.size() >= 10 && trivial * 10 > r.size() * 9)
    return ::testing::AssertionFailure() << "MISTRUSTED: " << trivial << " of " << r.size()
                                         << " reference values are zero or non-finite";
  if (worst_excess > 0.0)
    return ::testing::AssertionFailure()
           << "element " << worst << ": " << a[worst] << " vs ref " << r[worst] << " (max abs diff "
           << max_abs << ", rtol " << tol.rtol << ", atol " << tol.atol << ")";
  return ::testing::AssertionSuccess();
}

// Bitwise equality of the logical values (for kernels that only move or select values: a NaN
// moved is a NaN, so NaN equals NaN here). Empty or undefined tensors fail: nothing was moved.
inline ::testing::AssertionResult same_values(const Tensor& actual, const Tensor& expected) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure() << (actual.defined() ? "expected" : "actual") << " tensor is undefined";
  if (actual.numel() == 0 || expected.numel() == 0)
    return ::testing::AssertionFailure() << "nothing to compare: " << actual.numel() << " actual, "
                                         << expected.numel() << " expected elements";
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs "
                                         << shape_str(expected.shape());
  const std::vector<double> a = actual.to_vector_f64();
  const std::vector<double> e = expected.to_vector_f64();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
  return ::testing::AssertionSuccess();
}

// Runs fn, expects Error with `code`; returns the message.
template <typename Fn>
std::string error_message(StatusCode code, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected mixprec::Error, nothing was thrown";
  return "";
}

}  // namespace mixprec::test
