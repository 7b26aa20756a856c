// onednn_eltwise_test.cpp: backend::onednn relu (forward, backward from dst), unary math
// and linear_scale against hand-computed values and backend::ref in f64.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/kernels.h"
#include "backend/onednn/onednn_stats.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using backend::UnaryOp;
using test::close_to_ref;
using test::f64;
using test::random_input;
using test::same_values;

TEST(OneDnnEltwise, ReluHandComputed) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = Tensor::from_vector({-2, -0.5, 0, 0.25, 3}, {5}, dt);
    Tensor y = onednn::relu_forward(x);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.to_vector_f64(), (std::vector<double>{0, 0, 0, 0.25, 3}));
    Tensor dy = Tensor::from_vector({1, 2, 3, 4, 5}, {5}, dt);
    // diff_src = diff_dst where dst > 0: dst = 0 at x = 0 gives 0, as PyTorch.
    EXPECT_EQ(onednn::relu_backward(dy, y).to_vector_f64(), (std::vector<double>{0, 0, 0, 4, 5}));
  }
}

TEST(OneDnnEltwise, ReluKeepsLayoutAndMatchesRefExactly) {
  // relu only selects values: results are bit-identical to ref in both dtypes.
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = random_input({4, 8, 5, 5}, dt, 10, MemoryFormat::channels_last);
    Tensor y = onednn::relu_forward(x);
    EXPECT_TRUE(y.is_channels_last());
    EXPECT_TRUE(same_values(y, ref::relu_forward(f64(x))));
    // diff_dst contiguous while dst is channels-last: still element-for-element.
    Tensor dy = random_input({4, 8, 5, 5}, dt, 11, MemoryFormat::contiguous);
    Tensor dx = onednn::relu_backward(dy, y);
    EXPECT_TRUE(dx.is_channels_last());
    EXPECT_TRUE(same_values(dx, ref::relu_backward(f64(dy), f64(y))));
  }
}

TEST(OneDnnEltwise, ReluOnStridedViewIsCopiedFirst) {
  Tensor base = random_input({6, 10}, DType::f32, 20);
  Tensor view = base.as_strided({6, 5}, {10, 2}, 1);  // every other column
  EXPECT_TRUE(same_values(onednn::relu_forward(view), ref::relu_forward(f64(view))));
}

struct UnaryCase {
  UnaryOp op;
  const char* name;
  double lo, hi;
};
const UnaryCase kUnary[] = {
    {UnaryOp::exp, "exp", -4, 4},     {UnaryOp::log, "log", 0.05, 8},
    {UnaryOp::neg, "neg", -4, 4},     {UnaryOp::sqrt, "sqrt", 0.0, 9},
    {UnaryOp::abs, "abs", -4, 4},     {UnaryOp::tanh, "tanh", -4, 4},
    {UnaryOp::sigmoid, "sigmoid", -8, 8}, {UnaryOp::square, "square", -4, 4},
};

TEST(OneDnnEltwise, UnaryMatchesRef) {
  uint64_t seed = 30;
  for (DType dt : {DType::f32, DType::bf16})
    for (const UnaryCase& c : kUnary) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt));
      Tensor x = random_input({3, 50}, dt, ++seed, MemoryFormat::contiguous, c.lo, c.hi);
      Tensor y = onednn::unary(c.op, x);
      EXPECT_EQ(y.dtype(), dt);
      // f32: oneDNN's exp/tanh/sigmoid are polynomial approximations within a few ulps
      // (measured over 1M points: max rel error 2.8e-7): rtol 1e-5. Its log's error is
      // absolute, not relative: up to 3.7e-6 over [1e-3, 100] (measured; eltwise.cpp), so
      // atol 5e-6 for log (1e-6 otherwise, for values near 0).
      // bf16: computed in f32, rounded once to bf16 (<= 2^-9 relative): rtol 2^-8.
      const double atol = c.op == UnaryOp::log ? 5e-6 : 1e-6;
      const test::Tol tol = dt == DType::bf16 ? test::Tol{std::ldexp(1.0, -8), atol}
                                              : test::Tol{1e-5, atol};
      EXPECT_TRUE(close_to_ref(y, ref::unary(c.op, f64(x)), tol));
    }
}

TEST(OneDnnEltwise, LinearScale) {
  // 3x + 0.5 on small dyadic values: exact in f32 and bf16.
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = Tensor::from_vector({-1, 0, 0.5, 2}, {2, 2}, dt);
    EXPECT_EQ(onednn::linear_scale(x, 3.0, 0.5).to_vector_f64(),
              (std::vector<double>{-2.5, 0.5, 2, 6.5}));
  }
  Tensor x = random_input({100}, DType::f32, 40);
  // alpha/beta are rounded to f32 (oneDNN takes floats) and the fma rounds once: 1e-6.
  EXPECT_TRUE(close_to_ref(onednn::linear_scale(x, 0.1, -0.3), ref::linear_scale(f64(x), 0.1, -0.3),
                           test::Tol{1e-6, 1e-7}));
}

TEST(OneDnnEltwise, OnePrimitivePerElementCount) {
  // Dense tensors run flat, so shapes with the same numel share a primitive.
  Tensor a = random_input({8, 6}, DType::f32, 50), b = random_input({48}, DType::f32, 51);
  Tensor c = random_input({2, 3, 2, 4}, DType::f32, 52, MemoryFormat::channels_last);
  onednn::relu_forward(a);
  const int64_t created = onednn::onednn_primitive_creations();
  onednn::relu_forward(b);
  onednn::relu_forward(c);
  EXPECT_EQ(onednn::onednn_primitive_creations(), created);
}

TEST(OneDnnEltwise, F64IsUnimplemented) {
  // (f16 is emulated in f32: onednn_half_emulation_test.cpp)
  test::error_message(StatusCode::unimplemented,
                      [] { onednn::unary(UnaryOp::exp, Tensor::zeros({4}, DType::f64)); });
}

}  // namespace
}  // namespace mixprec
