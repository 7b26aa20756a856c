// tests/unit/backend/ref_test_util.h: small assertions shared by the ref/ref_*_test files.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::test {

// Runs fn, expects a mixprec::Error with StatusCode::invalid_argument, returns its message
// ("" and a test failure when nothing or something else is thrown).
template <typename Fn>
std::string invalid_argument_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected mixprec::Error, nothing was thrown";
  return "";
}

// Every element of t (logical order) within tol of expected; NaN expected means NaN.
inline ::testing::AssertionResult values_near(const Tensor& t, const std::vector<double>& expected,
                                              double tol) {
  if (!t.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  const std::vector<double> v = t.to_vector_f64();
  if (expected.empty()) return ::testing::AssertionFailure() << "nothing to compare: no expected values";
  if (v.size() != expected.size())
    return ::testing::AssertionFailure() << v.size() << " values, expected " << expected.size();
  for (size_t i = 0; i < v.size(); ++i) {
    const bool ok = std::isnan(expected[i]) ? std::isnan(v[i])
                                            : v[i] == expected[i] ||  // also +-inf
                                                  std::fabs(v[i] - expected[i]) <= tol;
    if (!ok)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << v[i] << " vs expected " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mixprec::test
