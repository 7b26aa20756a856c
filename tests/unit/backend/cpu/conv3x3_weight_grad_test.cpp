// conv3x3_weight_grad_test.cpp: backend::cpu::conv3x3_weight_grad (a bf16 3x3 convolution's
// weight gradient on AVX512-BF16) against backend::ref's float64 loops:
// - small integers: every product and every partial sum is exact in f32, so the kernel's own
//   summation order must give the reference's bits, over channel counts that fill, split and
//   pad its register blocks (1..37 inputs, 16..128 outputs), odd and one-pixel images, both
//   layouts, with and without bias, 1 and 2 threads;
// - random values: within f32 accumulation error of the reference;
// - inf/NaN in the input: NaN where the reference has NaN (0 x inf), as oneDNN's;
// - which cases it takes (applies), and that conv2d's bf16 backward goes through it.
// On a CPU without AVX512-BF16 the kernel cases are reported as skipped; the conv2d case runs
// on oneDNN there (the _no_bf16 twin in tests/CMakeLists.txt runs it so on every CPU).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>

#include "backend/cpu/conv3x3_weight_grad.h"
#include "backend/kernels.h"
#include "mixprec/ops/ops.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

using backend::Conv2dParams;

Conv2dParams same3x3() {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  return p;
}

bool kernel_available() {
  return backend::cpu::conv3x3_weight_grad_applies(Tensor::zeros({1, 1, 2, 2}, DType::bf16),
                                                   Tensor::zeros({1, 32, 2, 2}, DType::bf16), {32, 1, 3, 3},
                                                   same3x3());
}

// Integers in [-3, 3] (exact in bf16; products <= 9 and sums far below 2^24: exact in f32).
Tensor ints(const Shape& shape, uint64_t seed, MemoryFormat format) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-3, 3);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = float(d(rng));
  return Tensor::from_vector(v, shape, DType::bf16).to_memory_format(format);
}

::testing::AssertionResult same_values(const Tensor& a, const Tensor& ref) {
  const auto x = a.to_vector_f64(), y = ref.to_vector_f64();
  if (x.size() != y.size()) return ::testing::AssertionFailure() << x.size() << " vs " << y.size() << " elements";
  size_t nonzero = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i]) return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs ref " << y[i];
    nonzero += y[i] != 0;
  }
  // (A one-pixel image reaches only the centre tap: 1/9 of the gradient.)
  if (nonzero * 20 < y.size()) return ::testing::AssertionFailure() << "only " << nonzero << " non-zero: too weak";
  return ::testing::AssertionSuccess();
}

TEST(Conv3x3WeightGrad, IntegerInputsGiveTheReferenceBits) {
  if (!kernel_available()) GTEST_SKIP() << "no AVX512-BF16: oneDNN computes this gradient here";
  struct Case {
    int64_t n, c, o, h, w;
  };
  // O 80 and 112 end in a chunk of 16 and of 48 outputs (accumulate_image's 64-wide chunks).
  const Case cases[] = {{2, 32, 64, 16, 16}, {3, 1, 32, 5, 7},  {1, 3, 32, 8, 8},  {2, 5, 48, 9, 1},
                        {2, 16, 80, 1, 1},   {1, 37, 128, 6, 5}, {3, 8, 32, 4, 9}, {1, 20, 112, 3, 2}};
  int seed = 0;
  for (const Case& k : cases)
    for (MemoryFormat f : {MemoryFormat::channels_last, MemoryFormat::contiguous})
      for (bool bias : {true, false})
        for (int threads : {1, 2}) {
          SCOPED_TRACE("N=" + std::to_string(k.n) + " C=" + std::to_string(k.c) + " O=" + std::to_string(k.o) + " " +
                       std::to_string(k.h) + "x" + std::to_string(k.w) +
                       (f == MemoryFormat::contiguous ? " nchw" : " nhwc") + (bias ? " bias" : "") + " threads " +
                       std::to_string(threads));
          const Tensor x = ints({k.n, k.c, k.h, k.w}, uint64_t(seed++), f);
          const Tensor dy = ints({k.n, k.o, k.h, k.w}, uint64_t(seed++), f);
          const Shape ws{k.o, k.c, 3, 3};
          const int saved = omp_get_max_threads();
          omp_set_num_threads(threads);
          const backend::cpu::Conv3x3WeightGrads g = backend::cpu::conv3x3_weight_grad(x, dy, ws, bias);
          omp_set_num_threads(saved);
          const backend::WeightGrads r =
              backend::ref::conv2d_backward_weights(test::f64(x), test::f64(dy), ws, bias, same3x3());
          ASSERT_EQ(g.diff_weights.dtype(), DType::f32);
          ASSERT_EQ(g.diff_weights.shape(), ws);
          EXPECT_TRUE(same_values(g.diff_weights, r.diff_weights));
          ASSERT_EQ(g.diff_bias.defined(), bias);
          if (bias) EXPECT_TRUE(same_values(g.diff_bias, r.diff_bias));
        }
}

TEST(Conv3x3WeightGrad, RandomInputsWithinF32AccumulationError) {
  if (!kernel_available()) GTEST_SKIP() << "no AVX512-BF16: oneDNN computes this gradient here";
  const Shape xs{4, 32, 16, 16}, ds{4, 64, 16, 16}, ws{64, 32, 3, 3};
  const Tensor x = test::random_input(xs, DType::bf16, 11, MemoryFormat::channels_last);
  const Tensor dy = test::random_input(ds, DType::bf16, 12, MemoryFormat::channels_last);
  const backend::cpu::Conv3x3WeightGrads g = backend::cpu::conv3x3_weight_grad(x, dy, ws, true);
  const backend::WeightGrads r = backend::ref::conv2d_backward_weights(test::f64(x), test::f64(dy), ws, true, same3x3());
  const int64_t k = 4 * 16 * 16;
  EXPECT_TRUE(test::close_to_ref(g.diff_weights, r.diff_weights, test::f32_tol(k)));
  EXPECT_TRUE(test::close_to_ref(g.diff_bias, r.diff_bias, test::f32_tol(k)));
}

TEST(Conv3x3WeightGrad, NonFiniteInputGivesTheReferencesNaNs) {
  if (!kernel_available()) GTEST_SKIP() << "no AVX512-BF16: oneDNN computes this gradient here";
  Tensor x = ints({2, 4, 6, 6}, 21, MemoryFormat::channels_last);
  Tensor dy = ints({2, 32, 6, 6}, 22, MemoryFormat::channels_last);
  std::vector<float> xv(size_t(x.numel()));
  {
    const auto v = x.contiguous().to_vector_f64();
    for (size_t i = 0; i < v.size(); ++i) xv[i] = float(v[i]);
  }
  xv[5] = INFINITY;          // image 0, channel 0
  xv[xv.size() - 1] = NAN;   // image 1, channel 3, last pixel
  x = Tensor::from_vector(xv, x.shape(), DType::bf16).to_memory_format(MemoryFormat::channels_last);
  const Shape ws{32, 4, 3, 3};
  const backend::cpu::Conv3x3WeightGrads g = backend::cpu::conv3x3_weight_grad(x, dy, ws, false);
  const backend::WeightGrads r = backend::ref::conv2d_backward_weights(test::f64(x), test::f64(dy), ws, false, same3x3());
  const auto a = g.diff_weights.to_vector_f64(), b = r.diff_weights.to_vector_f64();
  int nans = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i])) << "element " << i << ": " << a[i] << " vs ref " << b[i];
    nans += std::isnan(b[i]);
  }
  EXPECT_GT(nans, 0);
}

TEST(Conv3x3WeightGrad, TakesOnlyItsCases) {
  if (!kernel_available()) GTEST_SKIP() << "no AVX512-BF16: the kernel applies nowhere here";
  const Tensor x = Tensor::zeros({2, 8, 6, 6}, DType::bf16), dy = Tensor::zeros({2, 32, 6, 6}, DType::bf16);
  using backend::cpu::conv3x3_weight_grad_applies;
  EXPECT_TRUE(conv3x3_weight_grad_applies(x, dy, {32, 8, 3, 3}, same3x3()));
  // 16 outputs: oneDNN's kernel is faster there (conv3x3_weight_grad.h).
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, Tensor::zeros({2, 16, 6, 6}, DType::bf16), {16, 8, 3, 3}, same3x3()));
  Conv2dParams p = same3x3();
  p.stride_h = 2;
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, dy, {32, 8, 3, 3}, p));
  p = same3x3();
  p.dil_w = 2;
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, dy, {32, 8, 3, 3}, p));
  p = same3x3();
  p.groups = 2;
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, dy, {32, 4, 3, 3}, p));
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, dy, {32, 8, 3, 3}, Conv2dParams{}));  // no padding
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, Tensor::zeros({2, 40, 6, 6}, DType::bf16), {40, 8, 3, 3}, same3x3()));
  EXPECT_FALSE(conv3x3_weight_grad_applies(x.to(DType::f32), dy.to(DType::f32), {32, 8, 3, 3}, same3x3()));
  EXPECT_FALSE(conv3x3_weight_grad_applies(x, dy, {32, 8, 5, 5}, same3x3()));
  // An image whose pair buffers would not stay in the cache goes to oneDNN.
  EXPECT_FALSE(conv3x3_weight_grad_applies(Tensor::zeros({1, 64, 112, 112}, DType::bf16),
                                           Tensor::zeros({1, 64, 112, 112}, DType::bf16), {64, 64, 3, 3}, same3x3()));
  // Not a case: an error naming the shapes, not a crash.
  EXPECT_THROW(backend::cpu::conv3x3_weight_grad(x, dy, {32, 8, 3, 3, 1}, false), Error);
}

// conv2d's bf16 weight gradient, whichever route this CPU takes (this kernel with
// AVX512-BF16, oneDNN without), against the reference: the route is wired and gives f32.
TEST(Conv3x3WeightGrad, Conv2dBackwardInBf16MatchesTheReference) {
  const Tensor x = ints({2, 24, 7, 9}, 31, MemoryFormat::channels_last);
  const Tensor w0 = ints({32, 24, 3, 3}, 32, MemoryFormat::contiguous);
  const Tensor b0 = ints({32}, 33, MemoryFormat::contiguous);
  Tensor w = w0.detach().requires_grad_(), b = b0.detach().requires_grad_();
  const Tensor y = conv2d(x, w, b, 1, 1);
  const Tensor g = ints(y.shape(), 34, MemoryFormat::channels_last);
  y.backward(g);
  const backend::WeightGrads r = backend::ref::conv2d_backward_weights(test::f64(x), test::f64(g), w0.shape(), true, same3x3());
  // A bf16 parameter's gradient is rounded to bf16 by the engine: compare what reaches it.
  EXPECT_TRUE(same_values(w.grad(), r.diff_weights.to(DType::bf16)));
  EXPECT_TRUE(same_values(b.grad(), r.diff_bias.to(DType::bf16)));
}

}  // namespace
}  // namespace mixprec
