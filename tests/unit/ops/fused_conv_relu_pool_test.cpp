// fused_conv_relu_pool_test.cpp: conv2d_relu_max_pool2d against the composition it replaces,
// relu_max_pool2d(conv2d(...)) (oneDNN's convolution + our fused pooling), forward and weight
// gradients. With small integer inputs every f32 sum is exact in any order, so the fused
// kernel (its own summation order) must agree bit for bit in f32, bf16 and f16, including
// ties (frequent with integers), windows entirely <= 0 and NaN; with random inputs it agrees
// to f32 rounding. Also: the cases it does not take run the composition, and Sequential
// fuses Conv2d + ReLU + MaxPool2d runs without changing a value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "backend/cpu/conv_relu_pool.h"
#include "mixprec/nn/nn.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"

namespace mixprec {
namespace {

// Integers in [lo, hi] times `scale` (a power of two): exact in every dtype.
Tensor ints(const Shape& shape, int lo, int hi, float scale, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = scale * float(d(rng));
  return Tensor::from_vector(v, shape, dt);
}

bool fused_available() {
  return backend::cpu::conv_relu_max_pool_applies(Tensor::zeros({1, 3, 4, 4}), Tensor::zeros({16, 3, 3, 3}),
                                                  Tensor(), 1, 1, 2);
}

// Bit-for-bit equality (NaN == NaN), and enough non-zero values to mean something.
::testing::AssertionResult identical(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << "shapes differ";
  const auto x = a.to_vector_f64(), y = b.to_vector_f64();
  size_t nonzero = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i]) return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
    nonzero += x[i] != 0;
  }
  if (nonzero * 5 < x.size()) return ::testing::AssertionFailure() << "only " << nonzero << " of " << x.size() << " non-zero";
  return ::testing::AssertionSuccess();
}

struct Outcome {
  Tensor out, dw, db;
};

// Forward, then backward with upstream gradient g, through `fn`.
template <typename Fn>
Outcome run(Fn fn, const Tensor& src, const Tensor& w, const Tensor& b, const Tensor& g) {
  Tensor wl = w.detach().requires_grad_(), bl = b.defined() ? b.detach().requires_grad_() : Tensor();
  Outcome r;
  r.out = fn(src, wl, bl);
  r.out.backward(g);
  r.dw = wl.grad();
  if (bl.defined()) r.db = bl.grad();
  return r;
}

Tensor fused(const Tensor& s, const Tensor& w, const Tensor& b) { return conv2d_relu_max_pool2d(s, w, b, 1, 1, 2); }
Tensor composed(const Tensor& s, const Tensor& w, const Tensor& b) { return relu_max_pool2d(conv2d(s, w, b, 1, 1), 2); }

TEST(FusedConvReluPool, IntegerInputsGiveTheCompositionsBitsInEveryDtype) {
  if (!fused_available()) GTEST_SKIP() << "no AVX-512: the fused kernel does not run on this CPU";
  int cases = 0;
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t c : {1, 2, 3})
      for (int64_t o : {16, 32, 48, 64})
        for (auto [h, wd] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {7, 10}, {5, 3}})
          for (bool with_bias : {true, false}) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " C=" + std::to_string(c) + " O=" + std::to_string(o) + " " +
                         std::to_string(h) + "x" + std::to_string(wd) + (with_bias ? " bias" : ""));
            const uint64_t seed = uint64_t(cases++);
            // Odd cases read a channels-last src (its rows' channels interleaved).
            Tensor src = ints({2, c, h, wd}, -4, 4, 1.f, dt, seed);
            if (seed % 2 == 1) src = src.to_memory_format(MemoryFormat::channels_last);
            const Tensor w = ints({o, c, 3, 3}, -3, 3, 1.f, dt, seed + 100);
            const Tensor b = with_bias ? ints({o}, -8, 8, 1.f, dt, seed + 200) : Tensor();
            const Tensor g = ints({2, o, h / 2, wd / 2}, -4, 4, 0.25f, dt, seed + 300);
            ASSERT_TRUE(backend::cpu::conv_relu_max_pool_applies(src, w, b, 1, 1, 2));
            const Outcome f = run(fused, src, w, b, g), ref = run(composed, src, w, b, g);
            EXPECT_TRUE(f.out.is_channels_last());
            EXPECT_EQ(f.out.dtype(), dt);
            EXPECT_TRUE(identical(f.out, ref.out));
            EXPECT_TRUE(identical(f.dw, ref.dw));
            if (with_bias) EXPECT_TRUE(identical(f.db, ref.db));
          }
}

TEST(FusedConvReluPool, RandomInputsAgreeToF32Rounding) {
  if (!fused_available()) GTEST_SKIP() << "no AVX-512: the fused kernel does not run on this CPU";
  manual_seed(3);
  const Tensor src = Tensor::normal({4, 3, 32, 32}, 0, 1);
  const Tensor w = Tensor::normal({32, 3, 3, 3}, 0, 0.3), b = Tensor::normal({32}, 0, 0.1);
  const Tensor g = Tensor::normal({4, 32, 16, 16}, 0, 1);
  const Outcome f = run(fused, src, w, b, g), ref = run(composed, src, w, b, g);
  const auto x = f.out.to_vector_f64(), y = ref.out.to_vector_f64();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / (1 + std::abs(y[i])));
  EXPECT_LT(worst, 1e-5);
  const auto dw = f.dw.to_vector_f64(), dw_ref = ref.dw.to_vector_f64();
  double scale = 0, diff = 0;
  for (size_t i = 0; i < dw.size(); ++i) scale = std::max(scale, std::abs(dw_ref[i])), diff = std::max(diff, std::abs(dw[i] - dw_ref[i]));
  EXPECT_GT(scale, 1.0);
  EXPECT_LT(diff / scale, 1e-4);
}

// bf16 (the seed CNN's first layer under autocast): the products are summed in f32 in
// another order than oneDNN's, so the stored bf16 outputs are the composition's bits except
// where a sum lands next to a bf16 rounding boundary (then one bf16 ulp apart).
TEST(FusedConvReluPool, RandomBf16InputsAgreeToBf16Rounding) {
  if (!fused_available()) GTEST_SKIP() << "no AVX-512: the fused kernel does not run on this CPU";
  manual_seed(4);
  for (int64_t c : {1, 3}) {
    const Tensor src = Tensor::normal({4, c, 32, 30}, 0, 1).to(DType::bf16);
    const Tensor w = Tensor::normal({32, c, 3, 3}, 0, 0.3).to(DType::bf16), b = Tensor::normal({32}, 0, 0.1).to(DType::bf16);
    const Tensor g = Tensor::normal({4, 32, 16, 15}, 0, 1).to(DType::bf16);
    const Outcome f = run(fused, src, w, b, g), ref = run(composed, src, w, b, g);
    const auto x = f.out.to_vector_f64(), y = ref.out.to_vector_f64();
    size_t same = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::abs(x[i] - y[i]), 0x1p-7 * std::abs(y[i]) + 1e-30) << "C=" << c << " element " << i;
      same += x[i] == y[i];
    }
    EXPECT_GT(double(same) / double(x.size()), 0.99) << "C=" << c;
    const auto dw = f.dw.to_vector_f64(), dw_ref = ref.dw.to_vector_f64();
    double scale = 0, diff = 0;
    for (size_t i = 0; i < dw.size(); ++i) scale = std::max(scale, std::abs(dw_ref[i])), diff = std::max(diff, std::abs(dw[i] - dw_ref[i]));
    EXPECT_LT(diff / scale, 1e-2) << "C=" << c;  // through outputs that may differ by a bf16 ulp
  }
}

// A non-finite pixel: the composition's weight gradient is NaN wherever a zero gradient meets
// it (0 x inf), so the fused op takes the composition's backward for such a batch.
class FusedConvReluPoolNonFinite : public ::testing::TestWithParam<float> {};

TEST_P(FusedConvReluPoolNonFinite, PropagatesAsInTheComposition) {
  if (!fused_available()) GTEST_SKIP() << "no AVX-512: the fused kernel does not run on this CPU";
  Tensor src = ints({1, 3, 8, 8}, -4, 4, 1.f, DType::f32, 7);
  std::vector<float> v = src.to_vector();
  v[size_t(1 * 64 + 3 * 8 + 4)] = GetParam();  // channel 1, row 3, column 4
  src = Tensor::from_vector(v, {1, 3, 8, 8});
  const Tensor w = ints({16, 3, 3, 3}, -3, 3, 1.f, DType::f32, 8), b = ints({16}, -2, 2, 1.f, DType::f32, 9);
  const Tensor g = ints({1, 16, 4, 4}, -4, 4, 1.f, DType::f32, 10);
  const Outcome f = run(fused, src, w, b, g), ref = run(composed, src, w, b, g);
  EXPECT_TRUE(identical(f.out, ref.out));
  const auto o = f.out.to_vector_f64();
  EXPECT_GT(std::count_if(o.begin(), o.end(), [](double x) { return !std::isfinite(x); }), 0);
  const auto a = f.dw.to_vector_f64(), e = ref.dw.to_vector_f64();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE((std::isnan(a[i]) && std::isnan(e[i])) || a[i] == e[i]) << i << ": " << a[i] << " vs " << e[i];
  EXPECT_GT(std::count_if(a.begin(), a.end(), [](double x) { return std::isnan(x); }), 0);
}

INSTANTIATE_TEST_SUITE_P(NaNAndInf, FusedConvReluPoolNonFinite,
                         ::testing::Values(std::numeric_limits<float>::quiet_NaN(),
                                           std::numeric_limits<float>::infinity(),
                                           -std::numeric_limits<float>::infinity()));

TEST(FusedConvReluPool, OtherCasesRunTheComposition) {
  const Tensor w4 = ints({16, 4, 3, 3}, -3, 3, 1.f, DType::f32, 1);
  EXPECT_FALSE(backend::cpu::conv_relu_max_pool_applies(ints({1, 4, 6, 6}, -4, 4, 1.f, DType::f32, 2), w4, Tensor(), 1, 1, 2));
  EXPECT_FALSE(backend::cpu::conv_relu_max_pool_applies(Tensor::zeros({1, 3, 6, 6}), Tensor::zeros({24, 3, 3, 3}), Tensor(), 1, 1, 2));
  EXPECT_FALSE(backend::cpu::conv_relu_max_pool_applies(Tensor::zeros({1, 3, 6, 6}), Tensor::zeros({16, 3, 3, 3}), Tensor(), 2, 1, 2));
  EXPECT_FALSE(backend::cpu::conv_relu_max_pool_applies(Tensor::zeros({1, 3, 6, 6}), Tensor::zeros({16, 3, 5, 5}), Tensor(), 1, 1, 2));
  EXPECT_FALSE(backend::cpu::conv_relu_max_pool_applies(Tensor::zeros({1, 3, 6, 6}, DType::f64), Tensor::zeros({16, 3, 3, 3}, DType::f64), Tensor(), 1, 1, 2));
  // An input that needs a gradient gets the composition's, src gradient included.
  const Tensor src = ints({2, 3, 6, 6}, -4, 4, 1.f, DType::f32, 3);
  const Tensor w = ints({16, 3, 3, 3}, -3, 3, 1.f, DType::f32, 4), g = ints({2, 16, 3, 3}, -4, 4, 1.f, DType::f32, 5);
  Tensor s1 = src.detach().requires_grad_(), s2 = src.detach().requires_grad_();
  conv2d_relu_max_pool2d(s1, w, Tensor(), 1, 1, 2).backward(g);
  relu_max_pool2d(conv2d(s2, w, Tensor(), 1, 1), 2).backward(g);
  ASSERT_TRUE(s1.grad().defined());
  EXPECT_TRUE(identical(s1.grad(), s2.grad()));
  // A 4-channel input: the composition, the same values.
  const Tensor src4 = ints({2, 4, 6, 6}, -4, 4, 1.f, DType::f32, 6);
  EXPECT_TRUE(identical(conv2d_relu_max_pool2d(src4, w4, Tensor(), 1, 1, 2), relu_max_pool2d(conv2d(src4, w4, Tensor(), 1, 1), 2)));
}

TEST(FusedConvReluPool, SequentialFusesConvReluPoolRunsWithoutChangingAValue) {
  manual_seed(11);
  auto conv = std::make_shared<nn::Conv2d>(3, 16, 3, 1, 1);
  auto conv2 = std::make_shared<nn::Conv2d>(16, 16, 3, 1, 1);
  nn::Sequential seq{conv, std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
                     conv2, std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2)};
  // Integer weights: exact sums, so fused and unfused agree bit for bit.
  conv->weight.copy_(ints({16, 3, 3, 3}, -3, 3, 0.125f, DType::f32, 1));
  conv->bias.copy_(ints({16}, -3, 3, 0.125f, DType::f32, 2));
  conv2->weight.copy_(ints({16, 16, 3, 3}, -3, 3, 0.125f, DType::f32, 3));
  const Tensor x = ints({2, 3, 8, 8}, -4, 4, 1.f, DType::f32, 4);
  const Tensor by_hand = max_pool2d(relu(conv2d(max_pool2d(relu(conv2d(x, conv->weight, conv->bias, 1, 1)), 2),
                                                conv2->weight, conv2->bias, 1, 1)),
                                    2);
  EXPECT_TRUE(identical(seq(x), by_hand));
  // A child with its own autocast setting is run as itself (and gives the same values here).
  conv->set_autocast(false);
  EXPECT_TRUE(identical(seq(x), by_hand));
}

// The fused op has no dilation or groups: a dilated or grouped Conv2d followed by ReLU and
// MaxPool2d runs as the three modules (a dilated one was once fused as undilated).
TEST(FusedConvReluPool, SequentialRunsDilatedAndGroupedConvolutionsAsThemselves) {
  manual_seed(12);
  for (auto [dilation, groups] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}}) {
    SCOPED_TRACE("dilation " + std::to_string(dilation) + " groups " + std::to_string(groups));
    auto conv = std::make_shared<nn::Conv2d>(4, 16, 3, 1, dilation, true, dilation, groups);
    nn::Sequential seq{conv, std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2)};
    conv->weight.copy_(ints(conv->weight.shape(), -3, 3, 0.125f, DType::f32, 5));
    conv->bias.copy_(ints({16}, -3, 3, 0.125f, DType::f32, 6));
    const Tensor x = ints({2, 4, 8, 8}, -4, 4, 1.f, DType::f32, 7);
    const Tensor by_hand =
        max_pool2d(relu(conv2d(x, conv->weight, conv->bias, 1, dilation, dilation, groups)), 2);
    EXPECT_TRUE(identical(seq(x), by_hand));
  }
}

}  // namespace
}  // namespace mixprec
