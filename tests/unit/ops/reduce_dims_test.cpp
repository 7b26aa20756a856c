// reduce_dims_test.cpp: which dims sum and mean reduce. A dim named twice ({0, 0}, or 0 and
// -n) is refused as PyTorch refuses it, rather than reduced once with a count that does not
// match; unsorted and negative dims reduce what they name, checked against a float64 loop.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

// The Error's code and message fn throws (ok and "" if none).
template <typename F>
std::pair<StatusCode, std::string> error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.status().code(), e.what()};
  }
  return {StatusCode::ok, ""};
}

// x[i][j] = 1 + i * 10 + j on a 3 x 4 grid: every element distinct, sums exact in f64.
Tensor grid() {
  std::vector<double> v;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) v.push_back(1 + i * 10 + j);
  return Tensor::from_vector_f64(v, {3, 4});
}

TEST(ReduceDims, RepeatedDimIsRefusedByEveryReduction) {
  const Tensor x = grid();
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{0, 0}, {0, -2}, {1, 0, 1}}) {
    for (const char* op : {"sum", "mean"}) {
      const auto [code, message] = error_of([&] {
        return std::string(op) == "sum" ? sum(x, dims, false) : mean(x, dims, true);
      });
      EXPECT_EQ(code, StatusCode::invalid_argument) << op;
      const std::string dim = dims[0] == 1 ? "1" : "0";
      EXPECT_NE(message.find(std::string(op) + ": dim " + dim + " appears twice"), std::string::npos) << message;
    }
  }
  // The same in f32 and under a tensor that requires grad (the check runs before recording).
  Tensor y = grid().to(DType::f32);
  y.requires_grad_(true);
  EXPECT_EQ(error_of([&] { return mean(y, {1, 1}, false); }).first, StatusCode::invalid_argument);
}

TEST(ReduceDims, UnsortedAndNegativeDimsReduceWhatTheyName) {
  const Tensor x = grid();
  // All of it: sum 1..34 over the grid = 3*4 + 10*(0+1+2)*4 + (0+1+2+3)*3 = 12 + 120 + 18.
  EXPECT_DOUBLE_EQ(sum(x, {1, 0}, false).item(), 150.0);
  EXPECT_DOUBLE_EQ(mean(x, {-1, 0}, false).item(), 150.0 / 12.0);
  // Rows: mean over dim -1 of row i is 1 + 10 i + 1.5.
  const Tensor rows = mean(x, {-1}, false);
  ASSERT_EQ(rows.shape(), (Shape{3}));
  for (int64_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(rows.to_vector_f64()[size_t(i)], 2.5 + 10.0 * double(i));
}

TEST(ReduceDims, MeanGradientDividesByTheReducedCount) {
  Tensor x = grid();
  x.requires_grad_(true);
  mean(x, {1, 0}, false).backward();
  for (double g : x.grad().to_vector_f64()) EXPECT_DOUBLE_EQ(g, 1.0 / 12.0);
  Tensor z = grid();
  z.requires_grad_(true);
  mean(z, {0}, false).backward(Tensor::full({4}, 1.0, DType::f64));
  for (double g : z.grad().to_vector_f64()) EXPECT_DOUBLE_EQ(g, 1.0 / 3.0);
}

}  // namespace
}  // namespace mixprec
