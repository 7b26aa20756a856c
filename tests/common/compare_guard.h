// tests/common/compare_guard.h: what every comparison helper checks before comparing values,
// so that no helper passes without having compared anything (issue 13):
// - no elements at all (an empty tensor, an empty golden entry) is a failure;
// - actual and expected both all zero is a failure unless the caller says zeros are the
//   point (AllZero::allowed: the gradient of an unused input, relu of negatives, ...): a
//   kernel that wrote nothing into a zeroed buffer, or a gradient that never flowed,
//   would otherwise "match" a reference that is zero for the same reason;
// - NaN is never equal to NaN unless the caller asks (NanEqual::yes), so a NaN that spread
//   through both sides is not a pass.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace mixprec::test {

enum class AllZero { reject, allowed };
enum class NanEqual { no, yes };

inline bool all_zero(const std::vector<double>& v) {
  for (double x : v)
    if (x != 0.0) return false;  // NaN != 0 too: a NaN is not "zero"
  return true;
}

// Success when actual/expected give the comparison something to check; a failure saying
// why not otherwise. `what` prefixes the message.
inline ::testing::AssertionResult not_vacuous(const std::string& what, const std::vector<double>& actual,
                                              const std::vector<double>& expected, AllZero zeros) {
  const std::string prefix = what.empty() ? "" : what + ": ";
  if (actual.empty() || expected.empty())
    return ::testing::AssertionFailure() << prefix << "nothing to compare (" << actual.size() << " actual, "
                                         << expected.size() << " expected elements)";
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << prefix << actual.size() << " actual elements, " << expected.size()
                                         << " expected";
  if (zeros == AllZero::reject && all_zero(actual) && all_zero(expected))
    return ::testing::AssertionFailure()
           << prefix << "actual and expected are both all zero (" << actual.size()
           << " elements): the comparison exercises nothing; pass AllZero::allowed if zeros are what the "
              "test means to check";
  return ::testing::AssertionSuccess();
}

// Element equality under the NaN rule above.
inline bool same_value(double a, double e, NanEqual nan) {
  if (std::isnan(a) || std::isnan(e)) return nan == NanEqual::yes && std::isnan(a) && std::isnan(e);
  return a == e;
}

}  // namespace mixprec::test
