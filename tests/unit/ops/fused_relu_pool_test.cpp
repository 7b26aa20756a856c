// fused_relu_pool_test.cpp: relu_max_pool2d against (a) hand-computed values, (b) the
// composition max_pool2d(relu(x)) it replaces (oneDNN kernels), forward and gradient, and
// (c) backend::ref's f64 relu + max-pool kernels, for f32/bf16/f16, NCHW/NHWC, odd sizes,
// channel counts that leave vector tails, ties and all-non-positive windows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/kernels.h"
#include "mixprec/ops.h"
#include "mixprec/ops_fused.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
const MemoryFormat kCl = MemoryFormat::channels_last;
const MemoryFormat kPlain = MemoryFormat::contiguous;

// Multiples of 0.5 in [-3, 3]: exact in every dtype, frequent ties (7 values), about 10%
// of 2x2 windows entirely <= 0, and zeros (relu's boundary) in the input.
Tensor tie_heavy(const Shape& shape, DType dt, MemoryFormat f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-6, 6);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = 0.5f * float(d(rng));
  Tensor t = Tensor::from_vector(v, shape, dt);
  return f == kPlain ? t : t.to_memory_format(f);
}

// Equal values (+0 == -0) and the fused result's zeros are +0 (PyTorch's relu gives +0).
// A comparison where fewer than min_nonzero of the values are non-zero is too weak to trust
// (gradients of k x k pooling are at most 1/k^2 non-zero).
::testing::AssertionResult same(const Tensor& fused, const Tensor& expected,
                                double min_nonzero = 0.1) {
  if (fused.shape() != expected.shape() || fused.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << fused.str() << " vs " << expected.str();
  const auto a = fused.to_vector_f64(), e = expected.to_vector_f64();
  size_t nonzero = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != e[i]) return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
    if (a[i] == 0.0 && std::signbit(a[i])) return ::testing::AssertionFailure() << "element " << i << " is -0";
    nonzero += a[i] != 0.0;
  }
  if (a.size() >= 10 && double(nonzero) < min_nonzero * double(a.size()))
    return ::testing::AssertionFailure() << "MISTRUSTED: only " << nonzero << " of " << a.size() << " non-zero";
  return ::testing::AssertionSuccess();
}

TEST(FusedReluPool, HandComputed) {
  // One 4x5 plane, 2x2 windows (last column dropped by floor mode):
  //   window (0,0): [1, 3; 3, 0]    -> 3, first 3 (position 1) gets the gradient
  //   window (0,1): [-1, -2; 0, -4] -> 0 (relu), no gradient anywhere (relu' = 0 at x <= 0)
  //   window (1,0): [2, 2; 2, 2]    -> 2, position 0
  //   window (1,1): [-5, 7; 7, 1]   -> 7, position 1
  Tensor x = Tensor::from_vector({1, 3, -1, -2, 9,
                                  3, 0, 0, -4, 9,
                                  2, 2, -5, 7, 9,
                                  2, 2, 7, 1, 9}, {1, 1, 4, 5});
  for (MemoryFormat f : {kPlain, kCl}) {
    Tensor xi = x.to_memory_format(f).detach().requires_grad_(true);
    Tensor y = relu_max_pool2d(xi, 2);
    EXPECT_EQ(y.to_vector_f64(), (std::vector<double>{3, 0, 2, 7}));
    y.backward(Tensor::from_vector({10, 20, 30, 40}, {1, 1, 2, 2}));
    EXPECT_EQ(xi.grad().to_vector_f64(), (std::vector<double>{0, 10, 0, 0, 0,
                                                              0, 0, 0, 0, 0,
                                                              30, 0, 0, 40, 0,
                                                              0, 0, 0, 0, 0}));
  }
}

struct Case {
  Shape shape;
  int64_t k;
};

TEST(FusedReluPool, MatchesReluThenMaxPoolForwardAndGradient) {
  const Case cases[] = {{{2, 19, 9, 7}, 2},    // odd H/W (floor), C tail of 3 lanes
                        {{1, 40, 8, 10}, 2},   // C = 40: 16-bit path's 32-lane tail
                        {{3, 5, 11, 9}, 3},    // k = 3
                        {{2, 64, 6, 6}, 2}};   // full vectors, as conv2's output
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (MemoryFormat f : {kPlain, kCl})
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (f == kCl ? " nhwc " : " nchw ") +
                     shape_str(c.shape) + " k" + std::to_string(c.k));
        const Tensor x0 = tie_heavy(c.shape, dt, f, 100 + c.shape[1]);
        Tensor xa = x0.detach().requires_grad_(true), xb = x0.detach().requires_grad_(true);
        Tensor fused = relu_max_pool2d(xa, c.k);
        Tensor composed = max_pool2d(relu(xb), c.k);
        EXPECT_TRUE(same(fused, composed));
        EXPECT_EQ(fused.is_channels_last() && !fused.is_contiguous(), f == kCl) << "layout kept";
        const Tensor g = tie_heavy(fused.shape(), dt, kPlain, 7);
        fused.backward(g);
        composed.backward(g);
        ASSERT_TRUE(xa.grad().defined());
        EXPECT_EQ(xa.grad().dtype(), dt);
        // The gradient is a scatter: equal values; zeros may differ in sign only in the
        // composition (oneDNN's relu backward multiplies by 0), never in ours.
        EXPECT_TRUE(same(xa.grad(), xb.grad(), 0.3 / double(c.k * c.k)));
      }
}

// Independent of oneDNN: backend::ref's f64 relu and max-pool loops (PyTorch's rules).
TEST(FusedReluPool, MatchesRefF64Composition) {
  for (DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat f : {kPlain, kCl}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (f == kCl ? " nhwc" : " nchw"));
      const Tensor x0 = tie_heavy({2, 17, 7, 9}, dt, f, 5);
      Tensor x = x0.detach().requires_grad_(true);
      Tensor y = relu_max_pool2d(x, 2);
      const Tensor g = tie_heavy(y.shape(), dt, kPlain, 6);
      y.backward(g);
      const backend::Pool2dParams p{2, 2, 2, 2, 0, 0};
      const Tensor r = ref::relu_forward(x0.to(DType::f64));
      const backend::PoolResult pr = ref::max_pool2d_forward(r, p);
      const Tensor gr = ref::relu_backward(
          ref::max_pool2d_backward(g.to(DType::f64), pr.workspace, r.shape(), p), r);
      EXPECT_TRUE(same(y.to(DType::f64), pr.dst));
      EXPECT_TRUE(same(x.grad().to(DType::f64), gr, 0.3 / 4));
    }
}

TEST(FusedReluPool, F64RunsTheCompositionAndBadInputsThrow) {
  Tensor x = tie_heavy({1, 2, 4, 4}, DType::f64, kPlain, 9).requires_grad_(true);
  Tensor y = relu_max_pool2d(x, 2);
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_TRUE(same(y, max_pool2d(relu(x.detach()), 2)));
  EXPECT_THROW(relu_max_pool2d(Tensor::zeros({2, 4, 4}), 2), Error);
  EXPECT_THROW(relu_max_pool2d(Tensor::zeros({1, 1, 4, 4}), 5), Error);
  EXPECT_THROW(relu_max_pool2d(Tensor::zeros({1, 1, 4, 4}), 0), Error);
}

}  // namespace
}  // namespace mixprec
