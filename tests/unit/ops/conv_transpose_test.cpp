// conv_transpose_test.cpp: what the transposed convolutions and conv1d promise beyond the op
// harness (values and gradients against backend/ref's direct loops) and op_shapes_test
// (PyTorch's shapes and errors): conv_transpose2d is conv2d's adjoint (<conv2d(y), x> ==
// <y, conv_transpose2d(x)> for the same weight), conv1d equals conv2d of unit height on the
// input padded along L by hand, with groups and dilation too, and bad dilation and groups
// arguments are clear errors.
#include <gtest/gtest.h>

#include <cstring>

#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector_f64(), y = b.to_vector_f64();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// The definition of the transpose: for every y and x, <conv2d(y, W), x> = <y, conv_transpose2d(x, W)>.
TEST(ConvTranspose, IsTheAdjointOfConv2d) {
  manual_seed(3);
  for (const auto& [stride, padding, out_pad] : {std::tuple{1, 0, 0}, {2, 1, 1}, {3, 2, 0}}) {
    SCOPED_TRACE("stride " + std::to_string(stride) + " padding " + std::to_string(padding));
    const Tensor W = Tensor::uniform({3, 4, 3, 3}, -1, 1, DType::f64);  // conv2d: O=3, C=4
    const Tensor x = Tensor::uniform({2, 3, 5, 4}, -1, 1, DType::f64);
    const Tensor up = conv_transpose2d(x, W, Tensor(), stride, padding, out_pad);
    const Tensor y = Tensor::uniform(up.shape(), -1, 1, DType::f64);
    const Tensor down = conv2d(y, W, Tensor(), stride, padding);
    ASSERT_EQ(down.shape(), x.shape());
    EXPECT_NEAR(dot(down, x), dot(y, up), 1e-10);
    // And in f32 through oneDNN, to f32 accuracy.
    const Tensor up32 = conv_transpose2d(x.to(DType::f32), W.to(DType::f32), Tensor(), stride, padding, out_pad);
    const std::vector<double> a = up32.to_vector_f64(), b = up.to_vector_f64();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
  }
}

// The same with groups and dilation: both ops read the weight [6, 4 / 2, 3, 3] with the same
// grouping (conv2d: 6 outputs from 4 inputs in 2 groups; the transpose: 6 inputs to 4
// outputs). (output_padding at or past the stride adds rows conv2d would read back: not an
// adjoint pair; the op harness and op_shapes_test check that case.)
TEST(ConvTranspose, IsTheAdjointOfConv2dWithGroupsAndDilation) {
  manual_seed(5);
  for (const auto& [stride, padding, out_pad, dilation] : {std::tuple{1, 0, 0, 3}, {2, 1, 1, 2}, {3, 2, 0, 1}}) {
    SCOPED_TRACE("stride " + std::to_string(stride) + " dilation " + std::to_string(dilation));
    const Tensor W = Tensor::uniform({6, 2, 3, 3}, -1, 1, DType::f64);
    const Tensor x = Tensor::uniform({2, 6, 4, 5}, -1, 1, DType::f64);
    const Tensor up = conv_transpose2d(x, W, Tensor(), stride, padding, out_pad, 2, dilation);
    ASSERT_EQ(up.size(1), 4);
    const Tensor y = Tensor::uniform(up.shape(), -1, 1, DType::f64);
    const Tensor down = conv2d(y, W, Tensor(), stride, padding, dilation, 2);
    ASSERT_EQ(down.shape(), x.shape());
    EXPECT_NEAR(dot(down, x), dot(y, up), 1e-10);
    const Tensor up32 =
        conv_transpose2d(x.to(DType::f32), W.to(DType::f32), Tensor(), stride, padding, out_pad, 2, dilation);
    const std::vector<double> a = up32.to_vector_f64(), b = up.to_vector_f64();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
  }
}

TEST(Conv1d, IsConv2dOfUnitHeight) {
  manual_seed(4);
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = Tensor::uniform({2, 3, 9}, -1, 1).to(dt), w = Tensor::uniform({5, 3, 4}, -1, 1).to(dt);
    const Tensor b = Tensor::uniform({5}, -1, 1).to(dt);
    const Tensor one = conv1d(x, w, b, 2, 1).contiguous();
    ASSERT_EQ(one.shape(), (Shape{2, 5, 4}));
    // conv2d pads both axes equally; conv1d's padding 1 along L only equals conv2d on the
    // input padded by hand along L.
    Tensor padded = Tensor::zeros({2, 3, 1, 11}, dt);
    const Tensor xs = x.contiguous();
    for (int64_t i = 0; i < 2 * 3; ++i)
      std::memcpy(static_cast<char*>(padded.data()) + (i * 11 + 1) * dtype_size(dt),
                  static_cast<const char*>(xs.data()) + i * 9 * dtype_size(dt), 9 * dtype_size(dt));
    const Tensor ref = conv2d(padded, w.reshape({5, 3, 1, 4}), b, 1, 0).contiguous();
    // stride 2 along L only: take every other column of the stride-1 result.
    const std::vector<double> r = ref.to_vector_f64(), o = one.to_vector_f64();
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t l = 0; l < 4; ++l)
          EXPECT_NEAR(o[size_t((n * 5 + c) * 4 + l)], r[size_t((n * 5 + c) * 8 + 2 * l)], dt == DType::bf16 ? 2e-2 : 1e-5)
              << dtype_name(dt);
  }
}

// PyTorch's argument rules, each with a message naming the op and what is wrong (the
// shapes' errors are op_shapes_test's, against PyTorch's).
TEST(Convolutions, BadDilationAndGroupsAreClearErrors) {
  const Tensor x1 = Tensor::uniform({2, 4, 9}, -1, 1), w1 = Tensor::uniform({4, 4, 3}, -1, 1);
  const Tensor x2 = Tensor::uniform({2, 4, 5, 5}, -1, 1), w2 = Tensor::uniform({4, 2, 3, 3}, -1, 1);
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto has = [](const std::string& m, const std::string& what) {
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  has(message([&] { conv1d(x1, w1, Tensor(), 1, 0, 0); }), "conv1d: dilation 0 (expected >= 1)");
  has(message([&] { conv1d(x1, w1, Tensor(), 1, 0, 1, 2); }),
      "conv1d: input [2, 4, 9], weight [4, 4, 3] and groups 2: the weight expects 8 input channels, the input has 4");
  has(message([&] { conv2d(x2, w2, Tensor(), 1, 0, 1, 3); }), "output channels 4 are not divisible by the groups");
  has(message([&] { conv2d(x2, w2, Tensor(), 1, 0, 3, 2); }), "conv2d: kernel [4, 2, 3, 3] dilated by 3 is larger");
  has(message([&] { conv_transpose2d(x2, w2, Tensor(), 1, 0, 0, 0); }), "conv_transpose2d: groups 0 (expected >= 1)");
  has(message([&] { conv_transpose2d(x2, w2, Tensor(), 2, 0, 2, 1, 2); }),
      "conv_transpose2d: output_padding must be smaller than the stride or the dilation");
  has(message([&] { conv_transpose1d(x1, w1, Tensor(), 1, 0, 0, 3); }), "conv_transpose1d: input [2, 4, 9]");
  has(message([&] { conv3d(Tensor::uniform({1, 4, 3, 3, 3}, -1, 1), Tensor::uniform({2, 2, 2, 2, 2}, -1, 1),
                           Tensor(), 1, 0, 3, 2); }),
      "conv3d: kernel [2, 2, 2, 2, 2] dilated by 3 is larger");
}

}  // namespace
}  // namespace mixprec
