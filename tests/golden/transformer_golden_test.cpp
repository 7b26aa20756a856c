// transformer_golden_test.cpp: nn::TransformerClassifier(seq 6, features 16, classes 5,
// d_model 16, heads 2, ffn 32) in f32 against PyTorch 1.13's nn.TransformerEncoderLayer +
// mean + Linear (tests/golden/gen_transformer.py, data/transformer_golden.safetensors):
// logits, loss, every parameter gradient and the input gradient, starting from PyTorch's
// (perturbed) parameters copied by name. Runs whichever backend the dispatcher picks
// (oneDNN by default; MIXPREC_BACKEND=ref for the reference loops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "mixprec/io/safetensors.h"
#include "golden_compare.h"

namespace mixprec {
namespace {

const char* const kGoldenPath =
    MIXPREC_SOURCE_DIR "/tests/golden/data/transformer_golden.safetensors";
// PyTorch's named_parameters() order for the generator's model; ours must be the same.
const char* const kParamNames[] = {
    "encoder.self_attn.in_proj_weight", "encoder.self_attn.in_proj_bias",
    "encoder.self_attn.out_proj.weight", "encoder.self_attn.out_proj.bias",
    "encoder.linear1.weight", "encoder.linear1.bias", "encoder.linear2.weight",
    "encoder.linear2.bias", "encoder.norm1.weight", "encoder.norm1.bias", "encoder.norm2.weight",
    "encoder.norm2.bias", "fc.weight", "fc.bias"};
constexpr int64_t kBatch = 3, kSeq = 6, kDModel = 16, kHeads = 2, kFfn = 32, kClasses = 5;

using golden_check::close_to_scale;

class TransformerModelGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(file_.load()); }
  static void TearDownTestSuite() { file_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(file_.loaded());
    model_ = std::make_unique<nn::TransformerClassifier>(kSeq, kDModel, kClasses, kDModel, kHeads,
                                                         kFfn);
    ASSERT_TRUE(file_.copy_parameters_into(*model_, {std::begin(kParamNames), std::end(kParamNames)}));
    x_ = golden("x").clone().requires_grad_(true);
    target_ = golden("target");
  }

  static const Tensor& golden(const std::string& name) { return file_(name); }

  static golden_check::GoldenFile file_;
  std::unique_ptr<nn::TransformerClassifier> model_;
  Tensor x_, target_;
};
golden_check::GoldenFile TransformerModelGolden::file_{kGoldenPath, "tests/golden/gen_transformer.py"};

TEST_F(TransformerModelGolden, FileHasEveryTensorAndProvenance) {
  EXPECT_EQ(file_.metadata().count("torch_version"), 1u);
  EXPECT_EQ(file_.metadata().at("seed"), "0");
  EXPECT_EQ(golden("x").shape(), (Shape{kBatch, kSeq, kDModel}));
  EXPECT_EQ(golden("logits").shape(), (Shape{kBatch, kClasses}));
  EXPECT_EQ(golden("loss").shape(), Shape{});
  EXPECT_EQ(golden("grad.x").shape(), golden("x").shape());
  for (const char* name : kParamNames)
    EXPECT_EQ(golden(std::string("grad.") + name).shape(), golden(name).shape()) << name;
}

TEST_F(TransformerModelGolden, ForwardLogitsAndLossMatchPyTorch) {
  const Tensor logits = (*model_)(x_);
  // 1e-5 of the largest logit: a chain of f32 dot products (K = 16, 8, 6, 32, 16), two
  // LayerNorms (ours accumulate in f64, PyTorch's in f32), an exp-based softmax and erf GELU,
  // each in another order than PyTorch's; agreement is a few ulps of the terms' scale
  // (~1e-6), 1e-5 leaves headroom while a wrong scale, bias or head split is off by >1e-2.
  EXPECT_TRUE(close_to_scale("logits", logits, golden("logits"), 1e-5));
  EXPECT_TRUE(close_to_scale("loss", cross_entropy(logits, target_), golden("loss"), 1e-5));
}

TEST_F(TransformerModelGolden, EveryGradientMatchesPyTorch) {
  cross_entropy((*model_)(x_), target_).backward();
  for (const auto& [name, p] : model_->named_parameters()) {
    // 1e-4 of the tensor's max |grad|: backward sums over batch and sequence (18 tokens) and
    // over the attention's key positions on top of the forward's rounding, in another
    // order; as in the CNN golden test, one decade above the forward's tolerance.
    EXPECT_TRUE(close_to_scale("grad." + name, p.grad(), golden("grad." + name), 1e-4));
  }
  // The input gradient crosses every layer backwards (both residual paths, Q, K and V).
  EXPECT_TRUE(close_to_scale("grad.x", x_.grad(), golden("grad.x"), 1e-4));
}

}  // namespace
}  // namespace mixprec
