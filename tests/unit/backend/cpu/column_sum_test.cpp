// column_sum_test.cpp: backend::cpu::column_sums_f32 (linear's diff_bias) against a float64
// loop, for f32 and bf16, serial and threaded sizes; bad input is an error, not a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <omp.h>

#include "backend/cpu/column_sum.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

void check_sums(DType dt, int64_t rows, int64_t cols, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
  Tensor x = test::random_input({rows, cols}, dt, seed);
  Tensor s = backend::cpu::column_sums_f32(x);
  ASSERT_EQ(s.dtype(), DType::f32);
  ASSERT_EQ(s.shape(), (Shape{cols}));
  const std::vector<double> v = x.to_vector_f64(), got = s.to_vector_f64();
  for (int64_t c = 0; c < cols; ++c) {
    double want = 0, mag = 0;
    for (int64_t r = 0; r < rows; ++r) {
      want += v[r * cols + c];
      mag += std::fabs(v[r * cols + c]);
    }
    // Inputs are exact in f32 (bf16 widens exactly); a sequential f32 sum of `rows` terms
    // errs by at most rows * 2^-24 of the sum of magnitudes.
    ASSERT_NEAR(got[c], want, double(rows) * 0x1p-24 * mag + 1e-30) << "column " << c;
  }
}

TEST(ColumnSum, MatchesFloat64) {
  for (DType dt : {DType::f32, DType::bf16}) {
    check_sums(dt, 1, 1, 1);
    check_sums(dt, 7, 300, 2);    // a partial column block (256 + 44), serial
    check_sums(dt, 512, 513, 3);  // threaded: 2 full blocks and a 1-column one
  }
}

TEST(ColumnSum, IndependentOfThreadCount) {
  Tensor x = test::random_input({400, 700}, DType::bf16, 9);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<double> one = backend::cpu::column_sums_f32(x).to_vector_f64();
  omp_set_num_threads(std::max(2, saved));
  const std::vector<double> two = backend::cpu::column_sums_f32(x).to_vector_f64();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);  // bit-identical: each column is summed by one thread in row order
}

TEST(ColumnSum, RejectsWhatItCannotSum) {
  EXPECT_THROW(backend::cpu::column_sums_f32(Tensor::zeros({2, 3, 4})), Error);
  EXPECT_THROW(backend::cpu::column_sums_f32(Tensor::zeros({4, 4}, DType::f16)), Error);
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_THROW(backend::cpu::column_sums_f32(t.as_strided({6, 4}, {1, 6}, 0)), Error);
}

}  // namespace
}  // namespace mixprec
