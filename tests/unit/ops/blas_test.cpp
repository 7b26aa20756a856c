// blas_test.cpp: what the BLAS-style ops (src/ops/blas.cpp) promise beyond shapes (those are
// checked against PyTorch in op_shapes_test.cpp) and values (op_harness_test.cpp): beta == 0
// ignores NaN in input, beta and alpha default to 1, operands share a dtype outside autocast,
// chain_matmul multiplies in PyTorch's order, addbmm rounds once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mixprec/amp/amp.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector_f64(); }

TEST(Blas, BetaZeroIgnoresNanInInputAndDefaultsAreOne) {
  const Tensor a = Tensor::uniform({4, 6}, -1, 1), b = Tensor::uniform({6, 3}, -1, 1);
  const Tensor nan = Tensor::full({4, 3}, std::nan(""));
  for (double v : values(addmm(nan, a, b, 0.0, 1.0))) EXPECT_FALSE(std::isnan(v));
  const Tensor v6 = Tensor::uniform({6}, -1, 1);
  for (double v : values(addmv(Tensor::full({4}, std::nan("")), a, v6, 0.0))) EXPECT_FALSE(std::isnan(v));
  // beta = alpha = 1 by default: input + product, as mm's result plus input.
  const Tensor input = Tensor::uniform({4, 3}, -1, 1);
  const std::vector<double> got = values(addmm(input, a, b)), p = values(mm(a, b)), i = values(input);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], i[k] + p[k], 1e-6);
  // beta and alpha scale their terms.
  const std::vector<double> s = values(addmm(input, a, b, 0.5, -2.0));
  for (size_t k = 0; k < s.size(); ++k) EXPECT_NEAR(s[k], 0.5 * i[k] - 2.0 * p[k], 1e-6);
}

TEST(Blas, DtypeMismatchIsAnErrorOutsideAutocastAndCastUnderIt) {
  const Tensor a = Tensor::uniform({4, 6}, -1, 1), b = Tensor::uniform({6, 3}, -1, 1).to(DType::bf16);
  EXPECT_THROW(mm(a, b), Error);
  const Tensor input16 = Tensor::zeros({4, 3}, DType::bf16), b32 = b.to(DType::f32);
  EXPECT_NO_THROW(addmm(input16.to(DType::f32), a, b32));  // the shapes fit: only the dtype differs below
  EXPECT_THROW(addmm(input16, a, b32), Error);
  amp::AutocastGuard g(DType::bf16);
  EXPECT_EQ(mm(a, b).dtype(), DType::bf16);
}

// chain_matmul's order is PyTorch's (multi_dot's): in bf16, where the order shows in the
// bits, [2, 8] x [8, 8] x [8, 1] is A(BC) (PyTorch's costs: (AB)C 2*8*(8+1) = 144 > A(BC)
// 8*1*(2+8) = 80) and [2, 8] x [8, 8] x [8, 8] is (AB)C (256 < 640).
TEST(Blas, ChainMatmulMultipliesInTheCheapestOrder) {
  manual_seed(5);
  auto bf = [](Shape s) { return Tensor::uniform(s, -1, 1).to(DType::bf16); };
  auto same = [](const Tensor& x, const Tensor& y) {
    return std::memcmp(x.contiguous().data(), y.contiguous().data(), size_t(x.numel()) * 2) == 0;
  };
  const Tensor a = bf({2, 8}), b = bf({8, 8}), c = bf({8, 1});
  EXPECT_TRUE(same(chain_matmul({a, b, c}), mm(a, mm(b, c))));
  const Tensor d = bf({2, 8}), e = bf({8, 8}), f = bf({8, 8});
  EXPECT_TRUE(same(chain_matmul({d, e, f}), mm(mm(d, e), f)));
}

// addbmm sums the batch inside one GEMM: its result is the exact sum rounded once. Values
// j/16 make every product and sum exact in f32 while the per-batch sums need more than
// bf16's 8 bits, so rounding each batch's product first would show.
TEST(Blas, AddbmmRoundsOnce) {
  auto sixteenths = [](Shape s, int seed) {
    std::vector<double> v(size_t(shape_numel(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t((i * 7 + size_t(seed)) % 33) - 16) / 16.0;
    return Tensor::from_vector_f64(v, s, DType::bf16);
  };
  const Tensor b1 = sixteenths({3, 4, 5}, 1), b2 = sixteenths({3, 5, 2}, 4);
  const Tensor zero = Tensor::zeros({4, 2}, DType::bf16);
  const Tensor got = addbmm(zero, b1, b2, 0.0, 1.0);
  const Tensor exact = addbmm(zero.to(DType::f64), b1.to(DType::f64), b2.to(DType::f64), 0.0, 1.0).to(DType::bf16);
  EXPECT_EQ(values(got), values(exact));
}

}  // namespace
}  // namespace mixprec
