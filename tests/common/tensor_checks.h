// tests/common/tensor_checks.h: the small checks the op and layer tests share (they were one
// block copied into five files): f64 tensors from literals, byte-for-byte equality, the
// message an Error carries, and element-wise closeness to expected values.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::test {

inline Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector_f64(v, s); }

// Same dtype, shape and bytes (compares the contiguous buffers).
inline ::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  if (std::memcmp(ca.data(), cb.data(), size_t(a.numel()) * dtype_size(a.dtype())) != 0)
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

// The message of the Error fn throws ("" if none).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline void expect_all_near(const Tensor& t, const std::vector<double>& expected, double tol) {
  const std::vector<double> v = t.to_vector_f64();
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], tol) << "element " << i;
}

}  // namespace mixprec::test
