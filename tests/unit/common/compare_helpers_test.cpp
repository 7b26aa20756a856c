// compare_helpers_test.cpp: the comparison helpers the other tests trust must not pass
// without having compared anything (issue 13): each one fails on undefined or empty
// tensors, on actual and expected both all zero (unless the caller allows it), and on NaN
// (unless the helper's contract is that a NaN moved is a NaN), and still passes on a real
// match and fails on a real mismatch.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <unistd.h>

#include "common/compare_guard.h"
#include "common/finite_diff.h"
#include "golden/golden_compare.h"
#include "mixprec/io/safetensors.h"
#include "unit/backend/onednn_test_util.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

using test::AllZero;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor values(const std::vector<double>& v) { return Tensor::from_vector_f64(v, {int64_t(v.size())}, DType::f64); }
Tensor empty_f64() { return Tensor::zeros({0}, DType::f64); }

TEST(NotVacuous, RefusesNothingMismatchedSizesAndBothZero) {
  EXPECT_FALSE(test::not_vacuous("x", {}, {}, AllZero::reject));
  EXPECT_FALSE(test::not_vacuous("x", {1.0}, {}, AllZero::reject));
  EXPECT_FALSE(test::not_vacuous("x", {1.0, 2.0}, {1.0}, AllZero::reject));
  EXPECT_FALSE(test::not_vacuous("x", {0.0, 0.0}, {0.0, -0.0}, AllZero::reject));
  EXPECT_TRUE(test::not_vacuous("x", {0.0, 0.0}, {0.0, 0.0}, AllZero::allowed));
  EXPECT_TRUE(test::not_vacuous("x", {0.0, 1.0}, {0.0, 0.0}, AllZero::reject));  // one side non-zero: a real check
  EXPECT_FALSE(test::all_zero({kNaN}));  // a NaN is not "zero"
}

TEST(NotVacuous, SameValueTreatsNanAsUnequalUnlessAsked) {
  EXPECT_FALSE(test::same_value(kNaN, kNaN, test::NanEqual::no));
  EXPECT_TRUE(test::same_value(kNaN, kNaN, test::NanEqual::yes));
  EXPECT_FALSE(test::same_value(kNaN, 1.0, test::NanEqual::yes));
  EXPECT_TRUE(test::same_value(2.0, 2.0, test::NanEqual::no));
}

TEST(GradientsMatch, FailsWhenNothingWasCompared) {
  EXPECT_FALSE(test::gradients_match(values({0, 0, 0}), values({0, 0, 0}), 1e-6));  // a gradient that never flowed
  EXPECT_TRUE(test::gradients_match(values({0, 0, 0}), values({0, 0, 0}), 1e-6, AllZero::allowed));
  EXPECT_FALSE(test::gradients_match(empty_f64(), empty_f64(), 1e-6));
  EXPECT_FALSE(test::gradients_match(Tensor(), values({1}), 1e-6));
  EXPECT_FALSE(test::gradients_match(values({1}), Tensor(), 1e-6));
}

TEST(GradientsMatch, FailsOnNanAndMismatchPassesOnMatch) {
  EXPECT_FALSE(test::gradients_match(values({kNaN, 1}), values({kNaN, 1}), 1e-6));
  EXPECT_FALSE(test::gradients_match(values({1, 2}), values({1, 2.1}), 1e-6));
  EXPECT_FALSE(test::gradients_match(values({1, 2}), values({1, 2, 3}), 1e-6));
  EXPECT_TRUE(test::gradients_match(values({1, -2, 0}), values({1 + 1e-9, -2, 0}), 1e-6));
}

TEST(GoldenAllClose, FailsWhenNothingWasCompared) {
  using golden_check::all_close;
  EXPECT_FALSE(all_close("z", values({0, 0}), values({0, 0}), 1e-3, "rule"));
  EXPECT_TRUE(all_close("z", values({0, 0}), values({0, 0}), 1e-3, "rule", AllZero::allowed));
  EXPECT_FALSE(all_close("e", empty_f64(), empty_f64(), 1e-3, "rule"));
  EXPECT_FALSE(all_close("u", Tensor(), values({1}), 1e-3, "rule"));
  EXPECT_FALSE(all_close("u", values({1}), Tensor(), 1e-3, "rule"));
  EXPECT_FALSE(all_close("n", values({kNaN}), values({kNaN}), 1e-3, "rule"));
  EXPECT_FALSE(all_close("m", values({1, 2}), values({1, 2.01}), 1e-3, "rule"));
  EXPECT_TRUE(all_close("ok", values({1, 2}), values({1, 2.0005}), 1e-3, "rule"));
  EXPECT_FALSE(golden_check::close_to_scale("s", values({0, 0}), values({0, 0}), 1e-3));
  EXPECT_TRUE(golden_check::close_to_scale("s", values({10, 1}), values({10, 1.001}), 1e-3));
}

TEST(GoldenFile, AFileWithoutTensorsAndAMissingTensorFail) {
  const std::string path = ::testing::TempDir() + "compare_helpers_empty_" + std::to_string(getpid()) + ".safetensors";
  ASSERT_TRUE(save_safetensors(path, {}).is_ok());
  golden_check::GoldenFile empty(path, "gen.py");
  EXPECT_FALSE(empty.load());

  ASSERT_TRUE(save_safetensors(path, {{"a", values({1, 2})}}).is_ok());
  golden_check::GoldenFile file(path, "gen.py");
  ASSERT_TRUE(file.load());
  EXPECT_EQ(file("a").numel(), 2);
  // A missing tensor is a failure, and the placeholder it returns matches nothing.
  Tensor missing;
  EXPECT_NONFATAL_FAILURE(missing = file("b"), "no tensor 'b'");
  EXPECT_FALSE(missing.defined());
  EXPECT_FALSE(golden_check::all_close("b", values({0}), missing, 1.0, "rule", AllZero::allowed));
  std::remove(path.c_str());
}

TEST(BackendHelpers, CloseToRefSameValuesAndValuesNearFailOnNothing) {
  const test::Tol tol{1e-5, 1e-6};
  EXPECT_FALSE(test::close_to_ref(empty_f64(), empty_f64(), tol));
  EXPECT_FALSE(test::close_to_ref(Tensor(), values({1}), tol));
  EXPECT_FALSE(test::close_to_ref(values({kNaN, 1}), values({1, 1}), tol));
  // More than 90% zeros in the reference: "MISTRUSTED", a comparison too weak to mean anything.
  EXPECT_FALSE(test::close_to_ref(Tensor::zeros({20}, DType::f64), Tensor::zeros({20}, DType::f64), tol));
  EXPECT_TRUE(test::close_to_ref(values({1, 2, 3}), values({1, 2, 3 + 1e-7}), tol));
  EXPECT_FALSE(test::close_to_ref(values({1, 2, 3}), values({1, 2, 3.1}), tol));

  EXPECT_FALSE(test::same_values(empty_f64(), empty_f64()));
  EXPECT_FALSE(test::same_values(Tensor(), values({1})));
  EXPECT_TRUE(test::same_values(values({kNaN, 1}), values({kNaN, 1})));  // moved NaN is a NaN
  EXPECT_FALSE(test::same_values(values({1, 2}), values({1, 3})));

  EXPECT_FALSE(test::values_near(empty_f64(), {}, 1e-6));
  EXPECT_FALSE(test::values_near(Tensor(), {1.0}, 1e-6));
  EXPECT_FALSE(test::values_near(values({1}), {1.0, 2.0}, 1e-6));
  EXPECT_TRUE(test::values_near(values({1, kNaN}), {1.0, kNaN}, 1e-6));  // NaN expected means NaN
  EXPECT_FALSE(test::values_near(values({1, 1}), {1.0, kNaN}, 1e-6));
}

}  // namespace
}  // namespace mixprec
