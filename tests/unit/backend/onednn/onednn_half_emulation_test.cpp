// onednn_half_emulation_test.cpp: the 16-bit emulation of backend::onednn (16-bit values
// in, f32 oneDNN compute, 16-bit out; half_emulation.h). It runs on f16 (emulated on every
// CPU) and, as the ctest variant *_bf16 with AVX-512 hidden (MIXPREC_TEST_DTYPE=bf16), on
// bf16 as a CPU without AVX-512 computes it. Two kinds of checks per kernel:
// - bit-exact: the f16 call equals the f32 oneDNN kernel run on the same (exactly widened)
//   values with its output rounded to f16 by convert_elements: that is the contract
//   ("what a tensor core does"), and it catches any extra rounding or lost layout;
// - independent: within f16 tolerance of backend::ref in f64 on the same values.
// Plus: gradients through ops conv2d / linear in f16 against f64 ref gradients, and an f16
// autocast training step that must not fall back to backend/ref.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/kernels.h"
#include "backend/onednn/half_emulation.h"
#include "mixprec/amp/amp.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "ops/dispatch.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using test::close_to_ref;
using test::f64;
using test::random_input;
using test::Tol;

// The dtype under test: f16, or bf16 when MIXPREC_TEST_DTYPE=bf16 (see the banner).
DType dtype_under_test() {
  const char* env = std::getenv("MIXPREC_TEST_DTYPE");
  return env != nullptr && std::string(env) == "bf16" ? DType::bf16 : DType::f16;
}
const DType kH = dtype_under_test();
const MemoryFormat kCl = MemoryFormat::channels_last;
const MemoryFormat kPlain = MemoryFormat::contiguous;

Tensor to32(const Tensor& t) { return t.defined() ? t.to(DType::f32) : t; }

// Every element equal, sign of zero included (f16 -> f64 is exact, so this is bit
// equality up to NaN payloads); dtype must be `dtype`.
::testing::AssertionResult bit_equal(const Tensor& actual, const Tensor& expected, DType dtype) {
  if (actual.dtype() != dtype)
    return ::testing::AssertionFailure() << "dtype " << dtype_name(actual.dtype()) << ", expected "
                                         << dtype_name(dtype);
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs "
                                         << shape_str(expected.shape());
  const auto a = actual.to_vector_f64(), e = expected.to_vector_f64();
  size_t nonzero = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(e[i])) continue;
    if (a[i] != e[i] || std::signbit(a[i]) != std::signbit(e[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
    nonzero += a[i] != 0.0;
  }
  if (a.size() >= 10 && nonzero * 10 < a.size())
    return ::testing::AssertionFailure() << "MISTRUSTED: only " << nonzero << " of " << a.size()
                                         << " values are non-zero";
  return ::testing::AssertionSuccess();
}

// The f32 result rounded to the 16-bit dtype: what the emulation must produce.
Tensor rounded(const Tensor& f32_result) { return f32_result.to(kH); }

// The unit roundoff of the dtype under test: 2^-11 for f16, 2^-8 for bf16 (8 significand
// bits instead of 11). Tolerances below are multiples of it.
const double kU = std::ldexp(1.0, kH == DType::bf16 ? -8 : -11);

// Against the exact f64 reference: one rounding to 16 bits (<= u relative) on top of f32
// accumulation (~1e-6 * sqrt(K)): rtol 2u (2x margin); atol for sums that cancel to near
// zero, where the f32 error is absolute.
Tol f16_tol(int64_t k) { return {2 * kU, 1e-5 * std::sqrt(double(k))}; }

// A bf16 run on a CPU where oneDNN has bf16 kernels would test nothing of the emulation:
// the ctest variant hides AVX-512, so this must hold everywhere.
TEST(OneDnnF16, DtypeUnderTestIsEmulated) {
  EXPECT_TRUE(onednn::is_emulated(Tensor::empty({1}, kH)))
      << dtype_name(kH) << " runs natively here: run with MIXPREC_CPU_DISABLE=avx512f";
}

backend::Conv2dParams conv_p(int64_t s, int64_t pad) { return {s, s, pad, pad}; }

TEST(OneDnnF16, ConvAllThreeKernelsBitExactAndCloseToRef) {
  for (MemoryFormat f : {kPlain, kCl}) {
    SCOPED_TRACE(f == kCl ? "nhwc" : "nchw");
    const Tensor x = random_input({2, 5, 7, 6}, kH, 1, f);
    const Tensor w = random_input({8, 5, 3, 3}, kH, 2);
    const Tensor b = random_input({8}, kH, 3);
    const auto p = conv_p(1, 1);
    const Tensor y = onednn::conv2d_forward(x, w, b, p);
    EXPECT_TRUE(bit_equal(y, rounded(onednn::conv2d_forward(to32(x), to32(w), to32(b), p)), kH));
    EXPECT_TRUE(close_to_ref(y, ref::conv2d_forward(f64(x), f64(w), f64(b), p), f16_tol(45)));

    const Tensor dy = random_input(y.shape(), kH, 4, kCl);
    const Tensor dx = onednn::conv2d_backward_data(dy, w, x.shape(), p);
    EXPECT_TRUE(bit_equal(dx, rounded(onednn::conv2d_backward_data(to32(dy), to32(w), x.shape(), p)), kH));
    EXPECT_TRUE(close_to_ref(dx, ref::conv2d_backward_data(f64(dy), f64(w), x.shape(), p), f16_tol(72)));

    // Backward weights hands out the f32 accumulator (as for bf16): no rounding at all.
    const auto wg = onednn::conv2d_backward_weights(x, dy, w.shape(), true, p);
    const auto wg32 = onednn::conv2d_backward_weights(to32(x), to32(dy), w.shape(), true, p);
    EXPECT_TRUE(bit_equal(wg.diff_weights, wg32.diff_weights, DType::f32));
    EXPECT_TRUE(bit_equal(wg.diff_bias, wg32.diff_bias, DType::f32));
    const auto wr = ref::conv2d_backward_weights(f64(x), f64(dy), w.shape(), true, p);
    EXPECT_TRUE(close_to_ref(wg.diff_weights, wr.diff_weights, test::f32_tol(84)));
    EXPECT_TRUE(close_to_ref(wg.diff_bias, wr.diff_bias, test::f32_tol(84)));
  }
}

TEST(OneDnnF16, LinearAndMatmulBitExactAndCloseToRef) {
  const Tensor x = random_input({9, 33}, kH, 10), w = random_input({7, 33}, kH, 11);
  const Tensor b = random_input({7}, kH, 12), dy = random_input({9, 7}, kH, 13);
  const Tensor y = onednn::linear_forward(x, w, b);
  EXPECT_TRUE(bit_equal(y, rounded(onednn::linear_forward(to32(x), to32(w), to32(b))), kH));
  EXPECT_TRUE(close_to_ref(y, ref::linear_forward(f64(x), f64(w), f64(b)), f16_tol(33)));
  const Tensor dx = onednn::linear_backward_data(dy, w);
  EXPECT_TRUE(bit_equal(dx, rounded(onednn::linear_backward_data(to32(dy), to32(w))), kH));
  EXPECT_TRUE(close_to_ref(dx, ref::linear_backward_data(f64(dy), f64(w)), f16_tol(7)));
  const auto wg = onednn::linear_backward_weights(x, dy, true);
  const auto wg32 = onednn::linear_backward_weights(to32(x), to32(dy), true);
  EXPECT_TRUE(bit_equal(wg.diff_weights, wg32.diff_weights, DType::f32));
  EXPECT_TRUE(bit_equal(wg.diff_bias, wg32.diff_bias, DType::f32));

  // matmul: batched, broadcast, transposed flags and a transposed view (kept as a view).
  const Tensor a = random_input({3, 5, 17}, kH, 14), c = random_input({1, 6, 17}, kH, 15);
  const Tensor m = onednn::matmul(a, c, false, true);
  EXPECT_TRUE(bit_equal(m, rounded(onednn::matmul(to32(a), to32(c), false, true)), kH));
  EXPECT_TRUE(close_to_ref(m, ref::matmul(f64(a), f64(c), false, true), f16_tol(17)));
  const Tensor base = random_input({17, 5}, kH, 16);
  const Tensor view = base.as_strided({5, 17}, {1, 5}, 0);  // base^T, not contiguous
  const Tensor rhs = random_input({17, 4}, kH, 17);
  const Tensor mv = onednn::matmul(view, rhs, false, false);
  EXPECT_TRUE(bit_equal(mv, rounded(onednn::matmul(to32(view), to32(rhs), false, false)), kH));
  EXPECT_TRUE(close_to_ref(mv, ref::matmul(f64(view), f64(rhs), false, false), f16_tol(17)));
}

TEST(OneDnnF16, ReluAndPoolingBitExactWithWorkspaceBackward) {
  for (MemoryFormat f : {kPlain, kCl}) {
    SCOPED_TRACE(f == kCl ? "nhwc" : "nchw");
    const Tensor x = random_input({2, 3, 9, 8}, kH, 20, f);
    const Tensor r = onednn::relu_forward(x);
    EXPECT_TRUE(bit_equal(r, rounded(onednn::relu_forward(to32(x))), kH));
    EXPECT_TRUE(close_to_ref(r, ref::relu_forward(f64(x)), {0.0, 0.0}));  // exact: a select
    const Tensor dr = random_input(x.shape(), kH, 21, f);
    EXPECT_TRUE(bit_equal(onednn::relu_backward(dr, r),
                          rounded(onednn::relu_backward(to32(dr), to32(r))), kH));

    for (int64_t k : {2, 3}) {
      backend::Pool2dParams p{k, k, k == 3 ? 1 : 2, k == 3 ? 1 : 2, 0, 0};
      const auto pr = onednn::max_pool2d_forward(x, p);
      const auto pr32 = onednn::max_pool2d_forward(to32(x), p);
      EXPECT_TRUE(bit_equal(pr.dst, rounded(pr32.dst), kH));
      EXPECT_TRUE(close_to_ref(pr.dst, ref::max_pool2d_forward(f64(x), p).dst, {0.0, 0.0}));
      // The f16 forward's workspace drives the backward (overlapping windows accumulate).
      const Tensor dd = random_input(pr.dst.shape(), kH, 22, f);
      const Tensor dx = onednn::max_pool2d_backward(dd, pr.workspace, x.shape(), p);
      const Tensor dx32 = onednn::max_pool2d_backward(to32(dd), pr32.workspace, x.shape(), p);
      EXPECT_TRUE(bit_equal(dx, rounded(dx32), kH));
      const auto rr = ref::max_pool2d_forward(f64(x), p);
      EXPECT_TRUE(close_to_ref(dx, ref::max_pool2d_backward(f64(dd), rr.workspace, x.shape(), p),
                               f16_tol(9)));
      const Tensor av = onednn::avg_pool2d_forward(x, p);
      EXPECT_TRUE(bit_equal(av, rounded(onednn::avg_pool2d_forward(to32(x), p)), kH));
    }
  }
}

TEST(OneDnnF16, SoftmaxLogSoftmaxBitExactAndCloseToRef) {
  const Tensor x = random_input({6, 37}, kH, 30, kPlain, -4.0, 4.0);
  const Tensor dy = random_input({6, 37}, kH, 31);
  const Tensor s = onednn::softmax_forward(x, 1), l = onednn::log_softmax_forward(x, 1);
  EXPECT_TRUE(bit_equal(s, rounded(onednn::softmax_forward(to32(x), 1)), kH));
  EXPECT_TRUE(bit_equal(l, rounded(onednn::log_softmax_forward(to32(x), 1)), kH));
  EXPECT_TRUE(close_to_ref(s, ref::softmax_forward(f64(x), 1), f16_tol(37)));
  EXPECT_TRUE(close_to_ref(l, ref::log_softmax_forward(f64(x), 1), f16_tol(37)));
  EXPECT_TRUE(bit_equal(onednn::softmax_backward(dy, s, 1),
                        rounded(onednn::softmax_backward(to32(dy), to32(s), 1)), kH));
  EXPECT_TRUE(bit_equal(onednn::log_softmax_backward(dy, l, 1),
                        rounded(onednn::log_softmax_backward(to32(dy), to32(l), 1)), kH));
}

TEST(OneDnnF16, BinaryAndReduceBitExactAndCloseToRef) {
  const Tensor a = random_input({4, 3, 5}, kH, 40), b = random_input({3, 1}, kH, 41);
  for (auto op : {backend::BinaryOp::add, backend::BinaryOp::sub, backend::BinaryOp::mul,
                  backend::BinaryOp::max}) {
    const Tensor y = onednn::binary(op, a, b);
    EXPECT_TRUE(bit_equal(y, rounded(onednn::binary(op, to32(a), to32(b))), kH));
    // add/sub/mul/max of two 16-bit values: f32 then 16 bits is the correctly rounded result.
    EXPECT_TRUE(close_to_ref(y, ref::binary(op, f64(a), f64(b)), {kU, 0.0}));
  }
  const Tensor big = random_input({8, 300}, kH, 42);
  for (auto op : {backend::ReduceOp::sum, backend::ReduceOp::mean, backend::ReduceOp::max}) {
    const Tensor y = onednn::reduce(op, big, {1}, false);
    EXPECT_TRUE(bit_equal(y, rounded(onednn::reduce(op, to32(big), {1}, false)), kH));
    EXPECT_TRUE(close_to_ref(y, ref::reduce(op, f64(big), {1}, false), f16_tol(300)));
  }
}

// Gradients through the ops layer with f16 leaves: conv2d -> flatten -> linear, backward
// from a fixed gradient. The engine hands f16 grads to f16 leaves; each must match the f64
// gradient (ref backend) within f16 rounding: every gradient passes through two or three
// f16 roundings (linear's diff_src, the conv kernels' outputs, the leaf cast), so rtol 8u
// (2^-8 for f16); atol for sums of ~100 O(1) products that cancel (2e-3 for f16, scaled by u).
TEST(OneDnnF16, OpsConvAndLinearGradientsMatchF64) {
  const Tensor x0 = random_input({2, 3, 6, 6}, kH, 50), w0 = random_input({4, 3, 3, 3}, kH, 51);
  const Tensor b0 = random_input({4}, kH, 52), lw0 = random_input({5, 144}, kH, 53);
  const Tensor lb0 = random_input({5}, kH, 54), g0 = random_input({2, 5}, kH, 55);
  auto run = [&](DType dt) {
    std::vector<Tensor> leaves;
    for (const Tensor* t : {&x0, &w0, &b0, &lw0, &lb0})
      leaves.push_back(t->to(dt).detach().requires_grad_(true));  // fresh leaves per run
    Tensor y = conv2d(leaves[0], leaves[1], leaves[2], 1, 1);  // [2, 4, 6, 6]
    Tensor z = linear(flatten(y, 1), leaves[3], leaves[4]);     // [2, 5]
    EXPECT_EQ(z.dtype(), dt);
    z.backward(g0.to(dt));
    std::vector<Tensor> grads;
    for (const Tensor& t : leaves) grads.push_back(t.grad());
    return grads;
  };
  const int64_t before = ref_fallback_count();
  const std::vector<Tensor> g16 = run(kH);
  EXPECT_EQ(ref_fallback_count(), before) << "an f16 kernel fell back to backend/ref";
  const std::vector<Tensor> g64 = run(DType::f64);
  const char* names[] = {"x", "conv w", "conv b", "linear w", "linear b"};
  for (size_t i = 0; i < g16.size(); ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_TRUE(g16[i].defined());
    EXPECT_EQ(g16[i].dtype(), kH);
    EXPECT_TRUE(close_to_ref(g16[i], g64[i], {8 * kU, 2e-3 * kU / std::ldexp(1.0, -11)}));
  }
}

// A full autocast-f16 training step of the seed CNN (small batch) runs every kernel on
// oneDNN (emulated): no op may fall back to the f64 reference loops (~5 s per step).
TEST(OneDnnF16, AutocastF16TrainingStepNeverFallsBackToRef) {
  manual_seed(7);
  nn::Cnn model(3, 32, 32, 10);
  const Tensor input = random_input({4, 3, 32, 32}, DType::f32, 60);
  const Tensor target = Tensor::from_vector_i64({1, 7, 3, 0}, {4});
  const int64_t before = ref_fallback_count();
  Tensor loss;
  {
    amp::AutocastGuard guard(kH);
    loss = cross_entropy(model(input), target);
  }
  loss.backward();
  EXPECT_EQ(ref_fallback_count(), before) << "an f16 op fell back to backend/ref";
  EXPECT_TRUE(std::isfinite(loss.item()));
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), DType::f32) << name;  // fp32 leaves get fp32 gradients
    double norm = 0.0;
    for (double v : p.grad().to_vector_f64()) norm += v * v;
    EXPECT_TRUE(std::isfinite(norm) && norm > 0.0) << name << " gradient norm " << norm;
  }
}

}  // namespace
}  // namespace mixprec
