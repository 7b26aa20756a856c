// conv_layer_types_test.cpp: the layer types conv1d, conv_transpose2d and prelu (the worked
// example of docs/design.md's "adding a layer type"), and the convolutions' groups and
// dilation: their shapes, parameter counts and errors at file:line:column; their modules against independent float64 loops with PyTorch's
// parameter layout and initialisation bounds; and model files using them training a few
// steps. (Every layer type's ONNX graph is checked by onnx_export_test.)
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/optim/optim.h"

namespace mixprec::nn {
namespace {

std::vector<ModelFileLayer> rows_of(const std::string& text, int64_t c, int64_t h, int64_t w) {
  std::vector<ModelFileLayer> rows;
  auto m = build_model_file(text, "net.yaml", c, h, w, 3, &rows);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return rows;
}

std::string error_of(const std::string& text, int64_t c, int64_t h, int64_t w) {
  auto m = build_model_file(text, "net.yaml", c, h, w, 3);
  EXPECT_FALSE(m.is_ok());
  return m.is_ok() ? "" : m.status().message();
}

TEST(ConvLayerTypes, ShapesAndParameterCounts) {
  // 1x8x8 -> sequence [8, 8] -> conv1d: 8 in, (8 + 2 - 3) / 2 + 1 = 4 long.
  auto rows = rows_of("layers: [sequence, conv1d: {out_channels: 5, kernel_size: 3, stride: 2, padding: 1}, "
                      "prelu: {num_parameters: 5}, flatten, linear: {out: classes}]",
                      1, 8, 8);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[1].type, "conv1d");
  EXPECT_EQ(rows[1].output_shape, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(rows[1].parameters, 5 * 8 * 3 + 5);
  EXPECT_EQ(rows[2].parameters, 5);
  // (4 - 1) * 2 - 2 + 3 + 1 = 8: the stride-2 transposed conv doubles 4x4.
  rows = rows_of("layers: [conv_transpose2d: {out_channels: 6, kernel_size: 3, stride: 2, padding: 1, "
                 "output_padding: 1, bias: false}, prelu, global_avgpool, linear: {out: classes}]",
                 2, 4, 4);
  EXPECT_EQ(rows[0].output_shape, (std::vector<int64_t>{6, 8, 8}));
  EXPECT_EQ(rows[0].parameters, 2 * 6 * 3 * 3);
  EXPECT_EQ(rows[1].parameters, 1);
  EXPECT_EQ(rows[0].output_op, std::optional<amp::OpId>(amp::OpId::conv_transpose2d));
}

TEST(ConvLayerTypes, MistakesPointIntoTheFile) {
  const auto has = [](const std::string& message, const std::string& what) {
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  has(error_of("layers:\n  - conv1d: {out_channels: 4, kernel_size: 3}\n", 1, 8, 8),
      "net.yaml:2:13: conv1d takes channels by length [C, L] (e.g. an image's rows after sequence); its input here "
      "is [1, 8, 8]");
  has(error_of("layers:\n  - sequence\n  - conv1d: {out_channels: 4}\n", 1, 8, 8),
      "net.yaml:3:13: needs kernel_size: N");
  has(error_of("layers:\n  - sequence\n  - conv1d: {out_channels: 4, kernel_size: 9}\n", 1, 8, 8),
      "conv1d: a kernel of 9 does not fit the input [8, 8] with padding 0");
  has(error_of("layers:\n  - conv1d: {out: 4}\n", 1, 8, 8),
      "conv1d has no parameter 'out' (did you mean 'out_channels'?)");
  has(error_of("layers:\n  - conv_transpose2d: {out_channels: 2, kernel_size: 2, stride: 2, output_padding: 2}\n", 1,
               4, 4),
      "net.yaml:2:84: output_padding: 2 must be smaller than the stride 2");
  has(error_of("layers:\n  - conv_transpose2d: {out_channels: 2, kernel_size: 1, padding: 3}\n", 1, 4, 4),
      "conv_transpose2d: the input [1, 4, 4] gives -2x-2 (expected 1..65536 each)");
  has(error_of("layers:\n  - prelu: {num_parameters: 2}\n", 3, 4, 4),
      "net.yaml:2:29: num_parameters: 2, but the input [3, 4, 4] has 3 channels");
}

// groups and dilation (PyTorch's meaning) on each convolution type: shapes, parameter counts
// (each output channel reads in / groups input channels), the modules' weight layouts, and
// the mistakes.
TEST(ConvLayerTypes, GroupsAndDilation) {
  // conv2d on 4x9x9, depthwise (groups 4), kernel 3 dilated by 2 (span 5), padding 1:
  // (9 + 2 - 5) / 1 + 1 = 7.
  auto rows = rows_of("layers: [conv2d: {out: 8, kernel: 3, padding: 1, dilation: 2, groups: 4}, flatten, "
                      "linear: {out: classes}]",
                      4, 9, 9);
  EXPECT_EQ(rows[0].output_shape, (std::vector<int64_t>{8, 7, 7}));
  EXPECT_EQ(rows[0].parameters, 8 * 1 * 3 * 3 + 8);
  // conv1d on sequence [6, 8], groups 3, dilation 3 (span 7): (8 - 7) / 1 + 1 = 2.
  rows = rows_of("layers: [sequence, conv1d: {out_channels: 3, kernel_size: 3, dilation: 3, groups: 3, bias: false}, "
                 "flatten, linear: {out: classes}]",
                 1, 6, 8);
  EXPECT_EQ(rows[1].output_shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(rows[1].parameters, 3 * 2 * 3);
  // conv_transpose2d on 4x3x3, groups 2, dilation 3, output_padding 2 (< the dilation, not
  // the stride 1): (3 - 1) * 1 - 0 + 3 * (2 - 1) + 1 + 2 = 8.
  rows = rows_of("layers: [conv_transpose2d: {out_channels: 6, kernel_size: 2, dilation: 3, output_padding: 2, "
                 "groups: 2}, global_avgpool, linear: {out: classes}]",
                 4, 3, 3);
  EXPECT_EQ(rows[0].output_shape, (std::vector<int64_t>{6, 8, 8}));
  EXPECT_EQ(rows[0].parameters, 4 * 3 * 2 * 2 + 6);

  const auto has = [](const std::string& message, const std::string& what) {
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  has(error_of("layers:\n  - conv2d: {out: 4, groups: 2}\n", 3, 8, 8),
      "conv2d: groups 2 must divide the input's 3 channels and the 4 output channels");
  has(error_of("layers:\n  - sequence\n  - conv1d: {out_channels: 3, kernel_size: 2, groups: 2}\n", 1, 4, 8),
      "conv1d: groups 2 must divide the input's 4 channels and the 3 output channels");
  has(error_of("layers:\n  - conv2d: {out: 4, kernel: 3, dilation: 4}\n", 1, 8, 8),
      "conv2d: a 3x3 kernel dilated by 4 does not fit the input [1, 8, 8] with padding 0");
  has(error_of("layers:\n  - conv2d: {out: 4, dilation: 0}\n", 1, 8, 8), "dilation");
  has(error_of("layers:\n  - conv_transpose2d: {out_channels: 2, kernel_size: 2, stride: 2, dilation: 2, "
               "output_padding: 2}\n", 1, 4, 4),
      "output_padding: 2 must be smaller than the stride 2 or the dilation 2");

  // The modules: PyTorch's weight layouts and fan-in (dim 1 times the kernel's size).
  manual_seed(5);
  Conv2d c2(4, 8, 3, 1, 1, true, 2, 4);
  EXPECT_EQ(c2.weight.shape(), (Shape{8, 1, 3, 3}));
  for (double v : c2.weight.to_vector_f64()) EXPECT_LE(std::abs(v), 1.0 / 3.0);
  Conv1d c1(6, 3, 3, 1, 0, 3, 3);
  EXPECT_EQ(c1.weight.shape(), (Shape{3, 2, 3}));
  ConvTranspose2d ct(4, 6, 2, 1, 0, 2, 2, true, 3);
  EXPECT_EQ(ct.weight.shape(), (Shape{4, 3, 2, 2}));
  EXPECT_EQ(ct(Tensor::uniform({1, 4, 3, 3}, -1, 1)).shape(), (Shape{1, 6, 8, 8}));
  EXPECT_THROW(Conv2d(3, 4, 3, 1, 0, true, 1, 2), Error);
  EXPECT_THROW(ConvTranspose2d(4, 3, 3, 1, 0, 0, 2), Error);
}

// The module's output against a float64 loop over its own weights.
TEST(ConvLayerTypes, ModulesComputeTheirDefinitions) {
  manual_seed(7);
  NoGradGuard no_grad;
  {
    Conv1d m(3, 4, 3, 2, 1);
    EXPECT_EQ(m.weight.shape(), (Shape{4, 3, 3}));  // PyTorch's [out, in, k]
    const Tensor x = Tensor::uniform({2, 3, 7}, -1, 1);
    const std::vector<double> y = m(x).to_vector_f64(), xv = x.to_vector_f64(), wv = m.weight.to_vector_f64(),
                              bv = m.bias.to_vector_f64();
    ASSERT_EQ(y.size(), size_t(2 * 4 * 4));  // (7 + 2 - 3) / 2 + 1 = 4
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t o = 0; o < 4; ++o)
        for (int64_t l = 0; l < 4; ++l) {
          double acc = bv[size_t(o)];
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t k = 0; k < 3; ++k) {
              const int64_t at = l * 2 - 1 + k;
              if (at >= 0 && at < 7) acc += wv[size_t((o * 3 + c) * 3 + k)] * xv[size_t((n * 3 + c) * 7 + at)];
            }
          EXPECT_NEAR(y[size_t((n * 4 + o) * 4 + l)], acc, 1e-5) << n << " " << o << " " << l;
        }
  }
  {
    ConvTranspose2d m(2, 3, 3, 2, 1, 1);
    EXPECT_EQ(m.weight.shape(), (Shape{2, 3, 3, 3}));  // PyTorch's [in, out, k, k]
    // kaiming_uniform(a = sqrt 5) with torch's fan-in of this layout: out * k * k = 27.
    const double bound = 1.0 / std::sqrt(27.0);
    for (double v : m.weight.to_vector_f64()) EXPECT_LE(std::abs(v), bound);
    const Tensor x = Tensor::uniform({1, 2, 3, 3}, -1, 1);
    const std::vector<double> y = m(x).to_vector_f64(), xv = x.to_vector_f64(), wv = m.weight.to_vector_f64(),
                              bv = m.bias.to_vector_f64();
    const int64_t H = 6;  // (3 - 1) * 2 - 2 + 3 + 1
    ASSERT_EQ(y.size(), size_t(3 * H * H));
    std::vector<double> want(size_t(3 * H * H));
    for (int64_t o = 0; o < 3; ++o)
      for (int64_t i = 0; i < H * H; ++i) want[size_t(o * H * H + i)] = bv[size_t(o)];
    // Each input pixel (c, i, j) adds w[c, o] at (i * stride - padding + ki, j * stride - padding + kj).
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t o = 0; o < 3; ++o)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                const int64_t r = i * 2 - 1 + ki, q = j * 2 - 1 + kj;
                if (r >= 0 && r < H && q >= 0 && q < H)
                  want[size_t((o * H + r) * H + q)] +=
                      xv[size_t((c * 3 + i) * 3 + j)] * wv[size_t(((c * 3 + o) * 3 + ki) * 3 + kj)];
              }
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << i;
  }
  {
    PReLU m(3, 0.1);
    EXPECT_EQ(m.weight.to_vector_f64(), (std::vector<double>{0.1f, 0.1f, 0.1f}));
    const Tensor x = Tensor::uniform({2, 3, 2}, -1, 1);
    const std::vector<double> y = m(x).to_vector_f64(), xv = x.to_vector_f64();
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], xv[i] > 0 ? xv[i] : double(0.1f) * xv[i], 1e-7);
  }
}

// A few SGD steps on one fixed batch: each file's loss falls (the layers' gradients reach
// their weights and point downhill), deterministic for the seed.
void expect_trains(const std::string& text, int64_t c, int64_t h, int64_t w) {
  SCOPED_TRACE(text);
  manual_seed(3);
  auto model = build_model_file(text, "net.yaml", c, h, w, 3);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const Tensor x = Tensor::uniform({6, c, h, w}, -1, 1);
  const Tensor y = Tensor::from_vector_i64({0, 1, 2, 0, 1, 2}, {6});
  optim::SGD sgd((*model)->parameters(), optim::SGDOptions{.lr = 0.3, .momentum = 0.9});
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    sgd.zero_grad();
    const Tensor loss = cross_entropy((**model)(x), y);
    losses.push_back(loss.to_vector_f64()[0]);
    loss.backward();
    sgd.step();
  }
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "first " << losses.front() << ", last " << losses.back();
  for (const auto& [name, p] : (*model)->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(ConvLayerTypes, ModelFilesWithThemTrain) {
  expect_trains("layers: [sequence, conv1d: {out_channels: 6, kernel_size: 3, padding: 1}, prelu: {num_parameters: 6}, "
                "flatten, linear: {out: classes}]",
                1, 6, 6);
  expect_trains("layers: [conv2d: {out: 4, kernel: 3, stride: 2, padding: 1}, prelu, conv_transpose2d: "
                "{out_channels: 3, kernel_size: 2, stride: 2}, relu, flatten, linear: {out: classes}]",
                2, 6, 6);
  expect_trains("layers: [conv2d: {out: 4, kernel: 3, padding: 2, dilation: 2, groups: 2}, prelu, conv_transpose2d: "
                "{out_channels: 4, kernel_size: 2, stride: 2, dilation: 2, groups: 2}, relu, sequence, conv1d: "
                "{out_channels: 4, kernel_size: 3, dilation: 2, groups: 4}, flatten, linear: {out: classes}]",
                2, 6, 6);
}

}  // namespace
}  // namespace mixprec::nn
