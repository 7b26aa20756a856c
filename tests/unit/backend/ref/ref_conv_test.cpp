// ref_conv_test.cpp: backend/ref conv2d against hand-computed outputs, its backward kernels
// against central differences of the forward, and its shape errors.
#include <gtest/gtest.h>

#include "backend/kernels.h"
#include "common/finite_diff.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using backend::Conv2dParams;
using test::gradients_match;
using test::numerical_gradient;
using test::random_tensor;
using test::values_near;

// x[i][j] = 3i + j + 1: 1..9 in a 3x3 plane.
Tensor one_to_nine(DType dtype = DType::f64) {
  return Tensor::from_vector_f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, dtype);
}

TEST(RefConv, Forward2x2KernelNoPad) {
  // out(i,j) = x(i,j) + 2 x(i,j+1) + 3 x(i+1,j) + 4 x(i+1,j+1), e.g. 1 + 4 + 12 + 20 = 37.
  Tensor w = Tensor::from_vector_f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor dst = ref::conv2d_forward(one_to_nine(), w, Tensor(), Conv2dParams{});
  EXPECT_EQ(dst.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(dst.dtype(), DType::f64);
  EXPECT_TRUE(values_near(dst, {37, 47, 67, 77}, 0.0));  // small integers: exact
}

TEST(RefConv, ForwardStride2Pad1WithBias) {
  // A 3x3 box filter over the zero-padded plane, sampled at the corners: 1+2+4+5 = 12, ...
  Tensor w = Tensor::ones({1, 1, 3, 3}, DType::f64);
  Tensor b = Tensor::from_vector_f64({0.5}, {1});
  Conv2dParams p;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  Tensor dst = ref::conv2d_forward(one_to_nine(), w, b, p);
  EXPECT_EQ(dst.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(values_near(dst, {12.5, 16.5, 24.5, 28.5}, 0.0));
}

TEST(RefConv, Forward1x1MixesChannelsFromChannelsLastF32) {
  // src [1,2,1,2]: channel 0 = [1, 2], channel 1 = [3, 4]. Outputs: c0, c1, c0 - c1.
  Tensor src = Tensor::from_vector({1, 2, 3, 4}, {1, 2, 1, 2}, DType::f32)
                   .to_memory_format(MemoryFormat::channels_last);
  ASSERT_TRUE(src.is_channels_last());
  Tensor w = Tensor::from_vector({1, 0, 0, 1, 1, -1}, {3, 2, 1, 1}, DType::f32);
  Tensor dst = ref::conv2d_forward(src, w, Tensor(), Conv2dParams{});
  EXPECT_EQ(dst.shape(), (Shape{1, 3, 1, 2}));
  EXPECT_EQ(dst.dtype(), DType::f32);
  EXPECT_TRUE(dst.is_contiguous());
  EXPECT_TRUE(values_near(dst, {1, 2, 3, 4, -2, -2}, 0.0));
}

TEST(RefConv, ForwardBf16RoundsOnceAtTheEnd) {
  // 37..77 fit bf16's 8-bit significand exactly.
  Tensor w = Tensor::from_vector_f64({1, 2, 3, 4}, {1, 1, 2, 2}, DType::bf16);
  Tensor dst = ref::conv2d_forward(one_to_nine(DType::bf16), w, Tensor(), Conv2dParams{});
  EXPECT_EQ(dst.dtype(), DType::bf16);
  EXPECT_TRUE(values_near(dst, {37, 47, 67, 77}, 0.0));
  // The sum is formed in f64 and rounded once: 256 + 3 * 0.5 = 257.5 -> 258 (bf16 spacing
  // is 2 at 256). A bf16 running sum would stay at 256 (256.5 rounds back to even, 256).
  Tensor src = Tensor::from_vector_f64({256, 0.5, 0.5, 0.5}, {1, 1, 2, 2}, DType::bf16);
  Tensor ones = Tensor::ones({1, 1, 2, 2}, DType::bf16);
  EXPECT_TRUE(values_near(ref::conv2d_forward(src, ones, Tensor(), Conv2dParams{}), {258}, 0.0));
}

// Backward kernels vs central differences of f(src, w, b) = <diff_dst, conv(src, w, b)>.
// f is linear in each input, so the difference has no truncation error; what is left is
// roundoff, ~1e-16 * |f| / eps ~ 1e-9 here, far inside rtol 1e-6.
void check_conv_gradients(const Shape& src_shape, const Shape& w_shape, const Conv2dParams& p) {
  Tensor src = random_tensor(src_shape, 11);
  Tensor w = random_tensor(w_shape, 12);
  Tensor b = random_tensor({w_shape[0]}, 13);
  const Tensor diff_dst = random_tensor(ref::conv2d_forward(src, w, b, p).shape(), 14);
  test::ScalarFn f = [&](std::vector<Tensor>& in) {
    return test::dot_f64(diff_dst, ref::conv2d_forward(in[0], in[1], in[2], p));
  };
  std::vector<Tensor> inputs{src, w, b};
  Tensor diff_src = ref::conv2d_backward_data(diff_dst, w, src_shape, p);
  backend::WeightGrads g = ref::conv2d_backward_weights(src, diff_dst, w_shape, true, p);
  EXPECT_TRUE(gradients_match(diff_src, numerical_gradient(f, inputs, 0), 1e-6));
  EXPECT_TRUE(gradients_match(g.diff_weights, numerical_gradient(f, inputs, 1), 1e-6));
  EXPECT_TRUE(gradients_match(g.diff_bias, numerical_gradient(f, inputs, 2), 1e-6));
}

TEST(RefConv, BackwardMatchesFiniteDifferencesStride2Pad1) {
  Conv2dParams p;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  check_conv_gradients({2, 3, 5, 5}, {4, 3, 3, 3}, p);
}

TEST(RefConv, BackwardMatchesFiniteDifferencesAsymmetric) {
  // Non-square kernel, different strides/pads per axis. H 5 with KH 2, stride 2 reads rows
  // 0..3 only, so row 4's gradient must be exactly the zero the differences give.
  Conv2dParams p;
  p.stride_h = 2;
  p.stride_w = 1;
  p.pad_h = 0;
  p.pad_w = 1;
  check_conv_gradients({1, 2, 5, 7}, {3, 2, 2, 3}, p);
}

TEST(RefConv, BackwardWeightsWithoutBiasLeavesItUndefined) {
  Tensor src = random_tensor({1, 1, 3, 3}, 1);
  Tensor diff_dst = random_tensor({1, 2, 2, 2}, 2);
  backend::WeightGrads g = ref::conv2d_backward_weights(src, diff_dst, {2, 1, 2, 2}, false, {});
  EXPECT_TRUE(g.diff_weights.defined());
  EXPECT_FALSE(g.diff_bias.defined());
}

TEST(RefConv, ErrorsNameTheOpAndBothShapes) {
  Tensor src = Tensor::zeros({1, 3, 4, 4});
  EXPECT_EQ(test::invalid_argument_message([&] {
              ref::conv2d_forward(src, Tensor::zeros({2, 1, 3, 3}), Tensor(), {});
            }),
            "conv2d: src [1, 3, 4, 4] and weights [2, 1, 3, 3]: channel mismatch 3 vs 1");
  std::string msg = test::invalid_argument_message([&] {
    ref::conv2d_forward(src, Tensor::zeros({2, 3, 3, 3}), Tensor::zeros({3}), {});
  });
  EXPECT_NE(msg.find("conv2d: bias [3] and weights [2, 3, 3, 3]"), std::string::npos) << msg;
  msg = test::invalid_argument_message([&] {
    ref::conv2d_forward(src, Tensor::zeros({2, 3, 5, 5}), Tensor(), {});
  });
  EXPECT_NE(msg.find("kernel 5x5"), std::string::npos) << msg;
  msg = test::invalid_argument_message([&] {
    ref::conv2d_forward(Tensor::zeros({3, 4, 4}), Tensor::zeros({2, 3, 3, 3}), Tensor(), {});
  });
  EXPECT_NE(msg.find("conv2d: src [3, 4, 4] must be 4-D"), std::string::npos) << msg;
  msg = test::invalid_argument_message([&] {
    ref::conv2d_forward(src, Tensor::zeros({2, 3, 3, 3}, DType::bf16), Tensor(), {});
  });
  EXPECT_NE(msg.find("conv2d: dtype mismatch: src f32 vs weights bf16"), std::string::npos) << msg;
  // Backward: diff_dst must have the forward output's shape.
  msg = test::invalid_argument_message([&] {
    ref::conv2d_backward_data(Tensor::zeros({1, 2, 3, 3}), Tensor::zeros({2, 3, 3, 3}),
                              {1, 3, 4, 4}, {});
  });
  EXPECT_NE(msg.find("conv2d_backward_data: diff_dst [1, 2, 3, 3] must be [1, 2, 2, 2]"),
            std::string::npos)
      << msg;
  msg = test::invalid_argument_message([&] {
    ref::conv2d_backward_weights(src, Tensor::zeros({1, 2, 2, 2}), {2, 1, 3, 3}, true, {});
  });
  EXPECT_NE(msg.find("conv2d_backward_weights: src [1, 3, 4, 4] and weights [2, 1, 3, 3]"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace mixprec
