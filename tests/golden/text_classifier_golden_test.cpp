// text_classifier_golden_test.cpp: a model file's text classifier with its padding masked
// (embedding {dim 16, context 8, mask_padding}, one encoder {heads 2, ffn 32}, global_avgpool,
// linear) in f32 against PyTorch 1.13: nn.TransformerEncoderLayer called with
// src_key_padding_mask and the mean over each text's own positions
// (tests/golden/gen_text_classifier.py, data/text_classifier_golden.safetensors): logits, loss
// and every parameter gradient on texts of 8, 5 and 2 bytes, from PyTorch's (perturbed)
// parameters copied by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden_compare.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

const char* const kGoldenPath = MIXPREC_SOURCE_DIR "/tests/golden/data/text_classifier_golden.safetensors";
const char* const kModelFile =
    "layers:\n"
    "  - embedding: {dim: 16, context: 8, mask_padding: true}\n"
    "  - encoder: {heads: 2, ffn: 32, dropout: 0}\n"
    "  - global_avgpool\n"
    "  - linear: {out: classes}\n";
// PyTorch's named_parameters() order for the generator's model; ours must be the same.
const std::vector<std::string> kParamNames = {
    "0.tokens.weight",  "0.positions.weight", "1.self_attn.in_proj_weight", "1.self_attn.in_proj_bias",
    "1.self_attn.out_proj.weight", "1.self_attn.out_proj.bias", "1.linear1.weight", "1.linear1.bias",
    "1.linear2.weight", "1.linear2.bias", "1.norm1.weight", "1.norm1.bias", "1.norm2.weight", "1.norm2.bias",
    "3.weight", "3.bias"};

using golden_check::close_to_scale;

TEST(TextClassifierGolden, MaskedForwardAndGradientsMatchPyTorch) {
  golden_check::GoldenFile file{kGoldenPath, "tests/golden/gen_text_classifier.py"};
  ASSERT_TRUE(file.load());
  EXPECT_EQ(file.metadata().at("lengths"), "8,5,2");  // padding of 0, 3 and 6 bytes
  auto model = nn::build_model_file(kModelFile, "golden.yaml", 1, 1, 8, 5, nullptr, nn::kMaxModelFileParameters,
                                    /*token_input=*/true);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ASSERT_TRUE(file.copy_parameters_into(**model, kParamNames));
  const Tensor& ids = file("ids");
  ASSERT_EQ(ids.shape(), (Shape{3, 8}));

  const Tensor logits = (**model)(ids);
  const Tensor loss = cross_entropy(logits, file("target"));
  // As the transformer golden test: f32 dot products and two LayerNorms in another order than
  // PyTorch's agree to a few ulps of the terms' scale; a padded key attended to, or padding
  // in the mean, moves the logits by >1e-2.
  EXPECT_TRUE(close_to_scale("logits", logits, file("logits"), 1e-5));
  EXPECT_TRUE(close_to_scale("loss", loss, file("loss"), 1e-5));
  loss.backward();
  for (const auto& [name, p] : (*model)->named_parameters())
    EXPECT_TRUE(close_to_scale("grad." + name, p.grad(), file("grad." + name), 1e-4));
}

}  // namespace
}  // namespace mixprec
