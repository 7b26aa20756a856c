// gpt_golden_test.cpp: nn::Gpt(context 8, 2 layers, d_model 16, 2 heads, vocab 256) in f32
// against PyTorch 1.13 (tests/golden/gen_gpt.py, data/gpt_golden.safetensors): the logits at
// every position, the loss over them, and every parameter's gradient (wte's gathers both the
// embedding's and the tied head's), starting from PyTorch's perturbed parameters copied by
// name. Covers causal attention, pre-norm residual blocks, learned positions and weight tying.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "golden_compare.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

const char* const kGoldenPath = MIXPREC_SOURCE_DIR "/tests/golden/data/gpt_golden.safetensors";
constexpr int64_t kBatch = 3, kContext = 8, kLayers = 2, kD = 16, kHeads = 2, kVocab = 256;

using golden_check::close_to_scale;

std::vector<std::string> parameter_names() {
  std::vector<std::string> names = {"wte.weight", "wpe.weight"};
  for (int l = 0; l < kLayers; ++l)
    for (const char* p : {"ln_1.weight", "ln_1.bias", "attn.in_proj_weight", "attn.in_proj_bias",
                          "attn.out_proj.weight", "attn.out_proj.bias", "ln_2.weight", "ln_2.bias",
                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      names.push_back("h." + std::to_string(l) + "." + p);
  names.push_back("ln_f.weight");
  names.push_back("ln_f.bias");
  return names;
}

class GptGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(file_.load()); }
  static void TearDownTestSuite() { file_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(file_.loaded());
    model_ = std::make_unique<nn::Gpt>(kContext, kLayers, kD, kHeads, kVocab);
    ASSERT_TRUE(file_.copy_parameters_into(*model_, parameter_names()));
  }

  static Tensor loss_of(const Tensor& logits) {
    return cross_entropy(reshape(logits, {kBatch * kContext, kVocab}),
                         reshape(file_("target"), {kBatch * kContext}));
  }

  static golden_check::GoldenFile file_;
  std::unique_ptr<nn::Gpt> model_;
};
golden_check::GoldenFile GptGolden::file_{kGoldenPath, "tests/golden/gen_gpt.py"};

TEST_F(GptGolden, ParametersAreNamedAndOrderedAsPyTorchs) {
  std::vector<std::string> ours;
  for (const auto& [name, p] : model_->named_parameters()) ours.push_back(name);
  EXPECT_EQ(ours, parameter_names());
  EXPECT_EQ(file_("logits").shape(), (Shape{kBatch, kContext, kVocab}));
  EXPECT_EQ(file_.metadata().count("torch_version"), 1u);
}

TEST_F(GptGolden, LogitsAtEveryPositionAndTheLossMatchPyTorch) {
  const Tensor logits = (*model_)(file_("tokens"));
  // 1e-5 of the largest logit: f32 products of length 16-64, four layer norms (ours accumulate
  // in f64), the causal softmax and erf GELU in another order than PyTorch's; a missing mask,
  // bias, position or a wrong head split is off by > 1e-2.
  EXPECT_TRUE(close_to_scale("logits", logits, file_("logits"), 1e-5));
  EXPECT_TRUE(close_to_scale("loss", loss_of(logits), file_("loss"), 1e-5));
}

TEST_F(GptGolden, EveryGradientMatchesPyTorch) {
  loss_of((*model_)(file_("tokens"))).backward();
  for (const auto& [name, p] : model_->named_parameters())
    // One decade above the forward's tolerance: backward sums over the 24 positions and the
    // attention's keys in another order (as the transformer and CNN golden tests).
    EXPECT_TRUE(close_to_scale("grad." + name, p.grad(), file_("grad." + name), 1e-4));
}

}  // namespace
}  // namespace mixprec
