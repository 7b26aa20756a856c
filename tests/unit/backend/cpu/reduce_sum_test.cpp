// reduce_sum_test.cpp: backend::cpu::reduce_sum (sums and means over axes that are not one
// trailing run) against a float64 per-index sum: every pattern of reduced and kept runs on
// 2-4 dims (size-1 dims among them), keepdim, mean, f32 within f32 accumulation error, bf16
// rounded once from the f32 sum; the same bits on 1 and 2 threads; which problems it takes;
// and that mixprec::sum / mean route there (a broadcast add's gradient, x.sum(0)).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/reduce_sum.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

using backend::cpu::reduce_sum;
using backend::cpu::reduce_sum_applies;

Tensor random_tensor(const Shape& shape, DType dt, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.5f, 2.0f);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = nd(g);
  return Tensor::from_vector_f64(v, shape, DType::f64).to(dt);
}

// The float64 sum over `axes` by index (the independent reference), as a flat vector in the
// output's row-major order.
std::vector<double> reference(const Tensor& src, const std::vector<int64_t>& axes, bool mean) {
  const Shape& shape = src.shape();
  const std::vector<double> v = src.to_vector_f64();
  Shape out_shape;
  for (int64_t d = 0; d < src.dim(); ++d)
    out_shape.push_back(std::count(axes.begin(), axes.end(), d) ? 1 : shape[size_t(d)]);
  std::vector<double> out(size_t(shape_numel(out_shape)), 0.0);
  int64_t count = 1;
  for (int64_t a : axes) count *= shape[size_t(a)];
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int64_t d = src.dim(); d-- > 0;) {
      const int64_t idx = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      o += (out_shape[size_t(d)] == 1 ? 0 : idx) * mul;
      mul *= out_shape[size_t(d)];
    }
    out[size_t(o)] += v[size_t(i)];
  }
  if (mean)
    for (double& x : out) x /= double(count);
  return out;
}

// Every subset of dims of each shape that the kernel takes, against the reference.
TEST(ReduceSum, EveryPatternAgainstTheFloat64Sum) {
  const std::vector<Shape> shapes = {{50, 256, 32}, {7, 1, 33, 5}, {3, 130}, {2, 3, 4, 70}, {1, 19, 1, 17}};
  int checked = 0;
  for (const Shape& shape : shapes)
    for (DType dt : {DType::f32, DType::bf16})
      for (uint32_t mask = 1; mask < (1u << shape.size()); ++mask) {
        std::vector<int64_t> axes;
        for (size_t d = 0; d < shape.size(); ++d)
          if (mask & (1u << d)) axes.push_back(int64_t(d));
        const Tensor src = random_tensor(shape, dt, mask * 7 + uint32_t(shape.size()));
        if (!reduce_sum_applies(src, axes)) continue;
        for (bool mean : {false, true})
          for (bool keepdim : {false, true}) {
            const Tensor out = reduce_sum(src, axes, keepdim, mean);
            Shape want_shape;
            for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
              const bool r = std::count(axes.begin(), axes.end(), d) > 0;
              if (!r || keepdim) want_shape.push_back(r ? 1 : shape[size_t(d)]);
            }
            ASSERT_EQ(out.shape(), want_shape);
            ASSERT_EQ(out.dtype(), dt);
            const std::vector<double> want = reference(src, axes, mean), got = out.to_vector_f64();
            int64_t count = 1;
            for (int64_t a : axes) count *= shape[size_t(a)];
            for (size_t i = 0; i < want.size(); ++i) {
              // f32 accumulation over `count` terms of |x| < ~10, then (bf16) one rounding.
              const double tol = (mean ? 1.0 / double(count) : 1.0) * 1e-6 * 10.0 * double(count) +
                                 (dt == DType::bf16 ? std::abs(want[i]) * 0.0040 : 0.0) + 1e-30;
              ASSERT_NEAR(got[i], want[i], tol) << shape_str(shape) << " axes mask " << mask << " mean " << mean
                                                << " element " << i;
            }
            ++checked;
          }
      }
  EXPECT_GT(checked, 100);
}

TEST(ReduceSum, SameBitsOnOneAndTwoThreads) {
  const Tensor src = random_tensor({64, 300, 40}, DType::f32, 3);
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{0}, {0, 2}, {1}, {0, 1}}) {
    omp_set_num_threads(1);
    const Tensor one = reduce_sum(src, axes, false, false);
    omp_set_num_threads(2);
    const Tensor two = reduce_sum(src, axes, false, false);
    ASSERT_EQ(std::memcmp(one.data(), two.data(), size_t(one.numel()) * 4), 0);
  }
}

TEST(ReduceSum, TakesWhatOneDnnRunsOnItsReferenceKernel) {
  const Tensor x = Tensor::zeros({50, 256, 32});
  EXPECT_TRUE(reduce_sum_applies(x, {0}));
  EXPECT_TRUE(reduce_sum_applies(x, {0, 2}));
  EXPECT_TRUE(reduce_sum_applies(x, {1}));
  EXPECT_FALSE(reduce_sum_applies(x, {2}));     // one trailing run: oneDNN's jit kernel
  EXPECT_FALSE(reduce_sum_applies(x, {1, 2}));
  EXPECT_FALSE(reduce_sum_applies(x, {0, 1, 2}));
  EXPECT_FALSE(reduce_sum_applies(Tensor::zeros({50, 1, 32}), {1}));          // size 1 only
  EXPECT_TRUE(reduce_sum_applies(Tensor::zeros({50, 1, 32}), {0, 1}));
  EXPECT_FALSE(reduce_sum_applies(Tensor::zeros({4, 6}, DType::f16), {0}));  // f16: oneDNN's emulation
  EXPECT_FALSE(reduce_sum_applies(Tensor::zeros({4, 6}, DType::f64), {0}));
  EXPECT_FALSE(reduce_sum_applies(Tensor::zeros({6, 4}).as_strided({4, 6}, {1, 4}, 0), {0}));  // not contiguous
}

TEST(ReduceSum, OpsRouteHereWithTheirGradients) {
  // A bias [C, 1] added to [T, C, B]: its gradient sums dims 0 and 2 (elementwise.cpp's
  // sum_to_shape), and x.sum(0) / mean over dim 0.
  const Tensor x = random_tensor({9, 21, 13}, DType::f32, 11);
  Tensor bias = random_tensor({21, 1}, DType::f32, 12);
  bias.requires_grad_(true);
  sum(add(x, bias)).backward();
  const std::vector<double> g = bias.grad().to_vector_f64();
  for (double v : g) EXPECT_EQ(v, 9.0 * 13.0);
  const Tensor s0 = sum(x, {0}, false), m0 = mean(x, {0}, false);
  const std::vector<double> want = reference(x, {0}, false), got = s0.to_vector_f64(), mg = m0.to_vector_f64();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4);
    EXPECT_NEAR(mg[i], want[i] / 9.0, 1e-5);
  }
  EXPECT_TRUE(std::memcmp(s0.data(), reduce_sum(x, {0}, false, false).data(), size_t(s0.numel()) * 4) == 0);
}

}  // namespace
}  // namespace mixprec
