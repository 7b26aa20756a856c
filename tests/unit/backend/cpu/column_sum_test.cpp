// column_sum_test.cpp: backend::cpu::column_sums_f32 (linear's diff_bias) against a float64
// loop, for f32 and bf16, serial and threaded sizes; bad input is an error, not a crash.
// transpose_with_column_sums: its transpose exact, its sums the bits of column_sums_f32 (the
// bias gradient must not change when linear.cpp takes the transposing route).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// The same f32 bits, -0.0f and +0.0f told apart.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  const auto* pa = static_cast<const uint32_t*>(a.data());
  const auto* pb = static_cast<const uint32_t*>(b.data());
  for (int64_t i = 0; i < a.numel(); ++i)
    if (pa[i] != pb[i])
      return ::testing::AssertionFailure() << "element " << i << ": bits " << std::hex << pa[i] << " vs " << pb[i];
  return ::testing::AssertionSuccess();
}

void check_transpose(const Tensor& x) {
  SCOPED_TRACE(std::string(dtype_name(x.dtype())) + " " + shape_str(x.shape()));
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto r = backend::cpu::transpose_with_column_sums(x, true);
  ASSERT_EQ(r.transposed.shape(), (Shape{cols, rows}));
  ASSERT_EQ(r.transposed.dtype(), x.dtype());
  ASSERT_TRUE(r.transposed.is_contiguous());
  const std::vector<double> v = x.to_vector_f64(), t = r.transposed.to_vector_f64(), got = r.sums.to_vector_f64();
  for (int64_t c = 0; c < cols; ++c) {
    double want = 0, mag = 0;
    for (int64_t n = 0; n < rows; ++n) {
      ASSERT_EQ(t[c * rows + n], v[n * cols + c]) << "x^T[" << c << "," << n << "]";
      want += v[n * cols + c];
      mag += std::fabs(v[n * cols + c]);
    }
    ASSERT_NEAR(got[c], want, double(rows) * 0x1p-24 * mag + 1e-30) << "column " << c;
  }
  EXPECT_TRUE(same_bits(r.sums, backend::cpu::column_sums_f32(x)));
  const auto no_sums = backend::cpu::transpose_with_column_sums(x, false);
  EXPECT_FALSE(no_sums.sums.defined());
  EXPECT_EQ(no_sums.transposed.to_vector_f64(), t);
}

TEST(TransposeWithColumnSums, ExactTransposeAndColumnSumsBits) {
  uint64_t seed = 20;
  for (DType dt : {DType::f32, DType::bf16}) {
    // 1 row or column; tails of the 16-wide tiles in both directions; a 256-row chunk and
    // a partial one (the sums' order); threaded sizes (the 2048 x 384 of gpt-tiny's qkv).
    for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 37}, {29, 1}, {16, 16}, {17, 15}, {33, 47}, {300, 31}, {513, 130}, {2048, 384}})
      check_transpose(test::random_input({rows, cols}, dt, seed++));
  }
}

TEST(TransposeWithColumnSums, EmptyRowsGiveZeroSums) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto r = backend::cpu::transpose_with_column_sums(Tensor::zeros({0, 5}, dt), true);
    EXPECT_EQ(r.transposed.shape(), (Shape{5, 0}));
    EXPECT_TRUE(same_bits(r.sums, Tensor::zeros({5})));
    const auto c = backend::cpu::transpose_with_column_sums(Tensor::zeros({7, 0}, dt), true);
    EXPECT_EQ(c.transposed.shape(), (Shape{0, 7}));
    EXPECT_EQ(c.sums.shape(), (Shape{0}));
  }
}

TEST(TransposeWithColumnSums, SignedZerosAndRoundingAsColumnSums) {
  // Columns of -0.0 only (a sum that must stay -0.0 where column_sums_f32's does), and values
  // whose f32 sum depends on the order of the adds (1, 2^-24 many times, -1), over more than one
  // 256-row chunk and a row tail.
  const int64_t rows = 600, cols = 21;
  std::vector<double> v(size_t(rows * cols));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < cols; ++c)
      v[size_t(n * cols + c)] = c % 3 == 0 ? -0.0 : c % 3 == 1 ? (n == 0 ? 1.0 : n == rows - 1 ? -1.0 : 0x1p-24 * (1 + c % 4))
                                                         : std::ldexp(1.0 + n % 7, -(n % 30));
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = Tensor::from_vector_f64(v, {rows, cols}, dt);
    const auto r = backend::cpu::transpose_with_column_sums(x, true);
    EXPECT_TRUE(same_bits(r.sums, backend::cpu::column_sums_f32(x))) << dtype_name(dt);
  }
}

TEST(TransposeWithColumnSums, IndependentOfThreadCount) {
  Tensor x = test::random_input({700, 400}, DType::bf16, 10);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = backend::cpu::transpose_with_column_sums(x, true);
  omp_set_num_threads(std::max(2, saved));
  const auto two = backend::cpu::transpose_with_column_sums(x, true);
  omp_set_num_threads(saved);
  EXPECT_TRUE(same_bits(one.sums, two.sums));
  EXPECT_EQ(one.transposed.to_vector_f64(), two.transposed.to_vector_f64());
}

TEST(TransposeWithColumnSums, RejectsWhatItCannotTranspose) {
  EXPECT_THROW(backend::cpu::transpose_with_column_sums(Tensor::zeros({2, 3, 4}), true), Error);
  EXPECT_THROW(backend::cpu::transpose_with_column_sums(Tensor::zeros({4, 4}, DType::f16), true), Error);
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_THROW(backend::cpu::transpose_with_column_sums(t.as_strided({6, 4}, {1, 6}, 0), false), Error);
}

}  // namespace
}  // namespace mixprec
