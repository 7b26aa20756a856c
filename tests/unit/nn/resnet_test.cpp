// resnet_test.cpp: nn::ResNet / BasicBlock: torchvision's parameter names and shapes, the
// parameter count of the CIFAR ResNet-20 (272,474, counted by hand below from He et al.'s
// architecture), the output shape for any input size, the identity vs projection shortcut,
// and a finite-difference check of a small ResNet's gradients in f64 (train-mode batch norm,
// residual adds, strided and 1x1 convolutions, global average pooling).
#include <gtest/gtest.h>

#include <cmath>

#include "common/finite_diff.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"

namespace mixprec {
namespace {

using test::random_tensor;

int64_t count(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : const_cast<nn::Module&>(m).named_parameters()) n += p.numel();
  return n;
}

TEST(ResNet, Resnet20HasTorchvisionNamesAndThePaperCount) {
  nn::ResNet net(3, 10);
  // conv1 432 + bn1 32; stage 1: 3 x (2 x 2304 + 2 x 32); stage 2: 4608 + 9216 + 128 + 512 + 64
  // (projection) + 2 x (2 x 9216 + 128); stage 3: 18432 + 36864 + 256 + 2048 + 128 +
  // 2 x (2 x 36864 + 256); fc 650.
  const int64_t expected = 432 + 32 + 3 * (2 * 2304 + 64) + (4608 + 9216 + 128 + 512 + 64) + 2 * (2 * 9216 + 128) +
                           (18432 + 36864 + 256 + 2048 + 128) + 2 * (2 * 36864 + 256) + 650;
  EXPECT_EQ(expected, 272474);
  EXPECT_EQ(count(net), expected);
  std::map<std::string, Shape> shapes;
  for (const auto& [name, p] : net.named_parameters()) shapes[name] = p.shape();
  EXPECT_EQ(shapes.at("conv1.weight"), (Shape{16, 3, 3, 3}));
  EXPECT_EQ(shapes.at("layer1.0.conv1.weight"), (Shape{16, 16, 3, 3}));
  EXPECT_EQ(shapes.at("layer2.0.conv1.weight"), (Shape{32, 16, 3, 3}));
  EXPECT_EQ(shapes.at("layer2.0.downsample.0.weight"), (Shape{32, 16, 1, 1}));
  EXPECT_EQ(shapes.at("layer2.0.downsample.1.weight"), (Shape{32}));
  EXPECT_EQ(shapes.at("layer3.2.bn2.bias"), (Shape{64}));
  EXPECT_EQ(shapes.at("fc.weight"), (Shape{10, 64}));
  EXPECT_EQ(shapes.count("layer1.0.downsample.0.weight"), 0u);  // identity shortcut
  EXPECT_EQ(shapes.count("conv1.bias"), 0u);                    // no conv biases
  // The batch norms' running statistics are buffers, named as torchvision's.
  bool found = false;
  for (const auto& [name, b] : net.named_buffers()) found = found || name == "layer3.0.downsample.1.running_var";
  EXPECT_TRUE(found);
}

TEST(ResNet, AnyInputSizeGivesLogits) {
  nn::ResNet net(1, 10);
  for (int64_t side : {28, 32, 9}) {
    const Tensor y = net(random_tensor({2, 1, side, side}, 1, -1, 1, DType::f32));
    EXPECT_EQ(y.shape(), (Shape{2, 10})) << side;
  }
  EXPECT_THROW(nn::ResNet(1, 10, 0), Error);
}

TEST(ResNet, SmallResnetGradientsMatchFiniteDifferencesInF64) {
  nn::ResNet net(2, 3, /*blocks_per_stage=*/1, /*width=*/2);
  net.to(DType::f64);
  uint64_t seed = 10;
  for (auto& [name, p] : net.named_parameters()) {
    Tensor t = p;
    // Batch-norm scales near 1 (as trained ones are); other weights small and signed.
    const bool scale = name.find("bn") != std::string::npos && name.find("weight") != std::string::npos;
    t.copy_(random_tensor(p.shape(), seed++, scale ? 0.5 : -0.5, scale ? 1.5 : 0.5));
  }
  Tensor x = random_tensor({3, 2, 6, 6}, 60);
  const Tensor weights = random_tensor({3, 3}, 61);
  x.requires_grad_(true);
  sum(mul(net(x), weights)).backward();
  auto loss = [&] {
    NoGradGuard ng;
    return test::dot_f64(net(x), weights);
  };
  auto numeric = [&](const Tensor& t) { return test::numerical_gradient_in_place(loss, t); };
  int checked = 0;
  for (auto& [name, p] : net.named_parameters()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(test::gradients_match(p.grad(), numeric(p), 1e-5));
    ++checked;
  }
  EXPECT_EQ(checked, 29);  // conv1, bn1 (2), 3 blocks x (2 convs + 2 bns x 2), 2 projections x 3, fc (2)
  SCOPED_TRACE("input");
  EXPECT_TRUE(test::gradients_match(x.grad(), numeric(x), 1e-5));
}

}  // namespace
}  // namespace mixprec
