// nan_propagation_test.cpp: a NaN must survive the ops between a broken weight and the loss,
// as in PyTorch (relu(NaN) = NaN, a max-pool window holding NaN yields NaN). Otherwise a
// diverged model trains on silently and the divergence guard never sees a NaN loss.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"

namespace mixprec {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class NanPropagation : public ::testing::TestWithParam<DType> {};

TEST_P(NanPropagation, ReluKeepsNaN) {
  Tensor x = Tensor::from_vector_f64({-1, kNaN, 2, 0, kNaN, -3, 4, 5}, {2, 4}).to(GetParam());
  const std::vector<double> y = relu(x).to_vector_f64();
  EXPECT_EQ(y[0], 0.0);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 2.0);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[7], 5.0);
}

TEST_P(NanPropagation, ReluBackwardPassesTheGradientAtNaNAndPositives) {
  // PyTorch: threshold_backward(grad, result, 0) zeroes where result <= 0; NaN is not <= 0.
  Tensor x = Tensor::from_vector_f64({-1, kNaN, 2, -0.0, 0, 3}, {2, 3}).to(GetParam());
  x.requires_grad_(true);
  sum(relu(x)).backward();
  EXPECT_EQ(x.grad().to_vector_f64(), (std::vector<double>{0, 1, 1, 0, 0, 1}));
  const std::vector<double> y = relu(x.detach()).to_vector_f64();
  EXPECT_FALSE(std::signbit(y[3])) << "relu(-0) is +0";
}

TEST_P(NanPropagation, FusedReluMaxPoolLetsNaNWinItsWindow) {
  for (MemoryFormat format : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    // 1 image, 32 channels (two AVX-512 vectors of f32), 4x4 -> 2x2. Channel c has a NaN at
    // window position c % 4 of output pixel (0, 0), and large finite values elsewhere that
    // would win an ordered comparison.
    const int64_t C = 32;
    std::vector<double> v(size_t(C * 16), 5.0);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t pos = c % 4, h = pos / 2, w = pos % 2;
      v[size_t(c * 16 + h * 4 + w)] = kNaN;
    }
    Tensor x = Tensor::from_vector_f64(v, {1, C, 4, 4}).to(GetParam()).to_memory_format(format);
    const Tensor y = relu_max_pool2d(x, 2).to(DType::f64).contiguous();
    const std::vector<double> out = y.to_vector_f64();
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_TRUE(std::isnan(out[size_t(c * 4)])) << "channel " << c << " format " << int(format);
      EXPECT_EQ(out[size_t(c * 4 + 3)], 5.0) << "channel " << c;  // a window without NaN
    }
  }
}

TEST_P(NanPropagation, CnnWithANaNWeightGivesANaNLoss) {
  manual_seed(0);
  nn::Cnn model(1, 28, 28);
  model.to(GetParam());
  // One NaN in the first convolution: every image's logits must become NaN.
  Tensor w = model.conv1->weight;
  Tensor broken = Tensor::from_vector_f64(std::vector<double>(size_t(w.numel()), 0.1), w.shape()).to(w.dtype());
  std::vector<double> vals = broken.to_vector_f64();
  vals[0] = kNaN;
  {
    NoGradGuard ng;
    w.copy_(Tensor::from_vector_f64(vals, w.shape()));
  }
  Tensor images = Tensor::normal({2, 1, 28, 28}, 0.0, 1.0).to(GetParam());
  Tensor loss = cross_entropy(model(images), Tensor::from_vector_i64({3, 7}, {2}));
  EXPECT_TRUE(std::isnan(loss.item()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NanPropagation, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace mixprec
