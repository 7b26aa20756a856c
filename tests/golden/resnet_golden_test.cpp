// resnet_golden_test.cpp: nn::ResNet(1 channel, 3 classes, 1 block per stage, width 4) in f32
// against PyTorch 1.13 with torchvision's BasicBlock layout (tests/golden/gen_resnet.py,
// data/resnet_golden.safetensors): logits, loss, every parameter gradient, the input gradient
// and the batch-norm running statistics after one training-mode forward, from PyTorch's
// perturbed parameters copied by name. Covers strided and 1x1 convolutions, batch norm in
// training mode, identity and projection shortcuts and global average pooling.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "golden_compare.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

const char* const kGoldenPath = MIXPREC_SOURCE_DIR "/tests/golden/data/resnet_golden.safetensors";

using golden_check::close_to_scale;

class ResNetGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(file_.load()); }
  static void TearDownTestSuite() { file_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(file_.loaded());
    model_ = std::make_unique<nn::ResNet>(1, 3, /*blocks_per_stage=*/1, /*width=*/4);
    model_->train();
    std::vector<std::string> names;  // every one must be in the file, with PyTorch's shape
    for (const auto& [name, p] : model_->named_parameters()) names.push_back(name);
    ASSERT_EQ(names.size(), 29u);  // 9 convs (no bias), 9 batch norms (weight, bias), fc (weight, bias)
    ASSERT_TRUE(file_.copy_parameters_into(*model_, names));
    x_ = file_("x").clone().requires_grad_(true);
  }

  static golden_check::GoldenFile file_;
  std::unique_ptr<nn::ResNet> model_;
  Tensor x_;
};
golden_check::GoldenFile ResNetGolden::file_{kGoldenPath, "tests/golden/gen_resnet.py"};

TEST_F(ResNetGolden, ForwardAndBatchNormRunningStatisticsMatchPyTorch) {
  const Tensor logits = (*model_)(x_);
  // 1e-5 of scale, as the other golden tests: convolutions of <= 72 terms and batch-norm
  // statistics over 16-256 values, in another order than PyTorch's.
  EXPECT_TRUE(close_to_scale("logits", logits, file_("logits"), 1e-5));
  EXPECT_TRUE(close_to_scale("loss", cross_entropy(logits, file_("target")), file_("loss"), 1e-5));
  int compared = 0;
  for (const auto& [name, b] : model_->named_buffers()) {
    EXPECT_TRUE(close_to_scale("running." + name, b, file_("running." + name), 1e-5));
    ++compared;
  }
  EXPECT_EQ(compared, 18);  // running_mean and running_var of the 9 batch norms
}

TEST_F(ResNetGolden, EveryGradientMatchesPyTorch) {
  cross_entropy((*model_)(x_), file_("target")).backward();
  for (const auto& [name, p] : model_->named_parameters())
    EXPECT_TRUE(close_to_scale("grad." + name, p.grad(), file_("grad." + name), 1e-4));
  EXPECT_TRUE(close_to_scale("grad.x", x_.grad(), file_("grad.x"), 1e-4));
}

}  // namespace
}  // namespace mixprec
