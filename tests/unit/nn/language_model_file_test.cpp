// language_model_file_test.cpp: a language model described in a model file (a file ending in
// lm_head): models/gpt-tiny.yaml and models/gpt.yaml are the built-in GPTs (same parameter
// count, and the built-in's weights copied in order give its logits), the head is tied to the
// embedding (no weight of its own, its gradient reaches the token table) or not, no position
// sees a later one, the cached one-token steps equal the full forward, and a file that would
// let a position see the future, or misplaces lm_head, is refused at its line and column.
#include <gtest/gtest.h>

#include "common/source_file.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"

namespace mixprec::nn {
namespace {

std::string repo_file(const std::string& name) { return test::source_file(name); }

const char* const kTinyLm =
    "layers:\n"
    "  - embedding: {dim: 16, context: 8}\n"
    "  - repeat: 2\n"
    "    layers:\n"
    "      - decoder: {heads: 2}\n"
    "  - layernorm\n"
    "  - lm_head\n";

std::shared_ptr<Module> build_lm(const std::string& text) {
  const ModelSpec spec = model_file_spec("lm.yaml", text);
  EXPECT_TRUE(spec.language_model);
  auto m = build_model(spec);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? *m : nullptr;
}

std::string error_of(const std::string& text) {
  auto m = build_model(model_file_spec("lm.yaml", text));
  return m.is_ok() ? "" : m.status().message();
}

TEST(LanguageModelFile, SpecComesFromTheFile) {
  EXPECT_EQ(model_file_context(kTinyLm), 8);
  EXPECT_EQ(model_file_context("layers: [{embedding: {dim: 4}}, decoder, lm_head]"), kDefaultLanguageModelContext);
  EXPECT_FALSE(model_file_context(repo_file("models/text-encoder.yaml")).has_value());
  EXPECT_FALSE(model_file_context(repo_file("models/cnn.yaml")).has_value());
  const ModelSpec spec = model_file_spec("lm.yaml", kTinyLm);
  EXPECT_TRUE(spec.language_model);
  EXPECT_EQ(spec.width, 9);  // windows of context + 1 bytes
  EXPECT_EQ(spec.classes, 256);
  const ModelSpec text = model_file_spec("t.yaml", repo_file("models/text-encoder.yaml"));
  EXPECT_FALSE(text.language_model);
  EXPECT_TRUE(text.token_input);
}

// The shipped files are the built-in models: the same count, and with the built-in's
// weights copied in order, the same logits.
TEST(LanguageModelFile, ShippedFilesAreTheBuiltInGpts) {
  for (const char* name : {"gpt-tiny", "gpt"}) {
    SCOPED_TRACE(name);
    const std::string text = repo_file(std::string("models/") + name + ".yaml");
    auto file = build_model(model_file_spec(name, text));
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    const ModelSpec builtin_spec = model_spec(name).value();
    EXPECT_EQ(model_file_spec(name, text).width, builtin_spec.width);
    auto builtin = make_model(builtin_spec);
    const auto a = (*file)->named_parameters(), b = builtin->named_parameters();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ((*file)->num_parameters(), builtin->num_parameters());
    if (std::string(name) == "gpt") continue;  // the logits check once, on the small one
    {
      NoGradGuard ng;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].second.shape(), b[i].second.shape()) << a[i].first << " vs " << b[i].first;
        Tensor dst = a[i].second;
        dst.copy_(b[i].second);
      }
    }
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 2 * 40; ++i) ids.push_back((i * 37 + 11) % 256);
    const Tensor x = Tensor::from_vector_i64(ids, {2, 40});
    NoGradGuard ng;
    const std::vector<double> ya = (**file)(x).to_vector_f64(), yb = (*builtin)(x).to_vector_f64();
    ASSERT_EQ(ya.size(), size_t(2 * 40 * 256));
    for (size_t i = 0; i < ya.size(); ++i) ASSERT_NEAR(ya[i], yb[i], 1e-5 * (1 + std::abs(yb[i]))) << i;
  }
}

TEST(LanguageModelFile, TiedHeadHasNoWeightAndItsGradientReachesTheTokenTable) {
  auto tied = build_lm(kTinyLm);
  std::string untied_text = kTinyLm;
  untied_text.replace(untied_text.find("lm_head"), 7, "lm_head: {tied: false}");
  auto untied = build_lm(untied_text);
  ASSERT_TRUE(tied && untied);
  EXPECT_EQ(untied->num_parameters() - tied->num_parameters(), 256 * 16);
  // The tied table is the head's weight too: d logits.sum() / d W[v] is the sum of the head's
  // inputs for every byte v, so rows of bytes that are not in the input get a gradient.
  const Tensor x = Tensor::from_vector_i64({3, 1, 4, 1, 5, 9}, {1, 6});
  sum((*tied)(x)).backward();
  Tensor table;
  for (const auto& [name, p] : tied->named_parameters())
    if (name == "0.tokens.weight") table = p;
  ASSERT_TRUE(table.defined());
  ASSERT_TRUE(table.grad().defined());
  // Row 200 is never an input token: any gradient there came through the head.
  const std::vector<double> g = table.grad().to_vector_f64();
  double row200 = 0;
  for (int64_t j = 0; j < 16; ++j) row200 += std::fabs(g[size_t(200 * 16 + j)]);
  EXPECT_GT(row200, 0.0);
}

TEST(LanguageModelFile, NoPositionSeesALaterOneAndStepsEqualTheFullForward) {
  auto lm = build_lm(kTinyLm);
  ASSERT_TRUE(lm);
  NoGradGuard ng;
  const std::vector<int64_t> seq = {72, 101, 108, 108, 111, 32, 71};
  std::vector<int64_t> changed = seq;
  changed.back() = 200;
  const std::vector<double> a = (*lm)(Tensor::from_vector_i64(seq, {1, 7})).to_vector_f64();
  const std::vector<double> b = (*lm)(Tensor::from_vector_i64(changed, {1, 7})).to_vector_f64();
  for (size_t k = 0; k < 6 * 256; ++k) ASSERT_EQ(a[k], b[k]) << "position " << k / 256 << " saw the last token";
  EXPECT_NE(a[6 * 256], b[6 * 256]);

  auto* stepper = dynamic_cast<StepwiseLanguageModel*>(lm.get());
  ASSERT_NE(stepper, nullptr);
  EXPECT_EQ(stepper->context_length(), 8);
  KvCache cache;
  double worst = 0, scale = 0;
  for (size_t t = 0; t < seq.size(); ++t) {
    const std::vector<double> step = stepper->forward_step(seq[t], cache).to_vector_f64();
    ASSERT_EQ(step.size(), 256u);
    for (size_t v = 0; v < 256; ++v) {
      worst = std::max(worst, std::fabs(step[v] - a[t * 256 + v]));
      scale = std::max(scale, std::fabs(a[t * 256 + v]));
    }
  }
  EXPECT_EQ(cache.length, 7);
  EXPECT_EQ(cache.keys.size(), 2u);  // one per decoder
  EXPECT_LT(worst, 1e-5 * std::max(scale, 1.0));
  EXPECT_THROW(stepper->forward_step(256, cache), Error);  // not a byte
  stepper->forward_step(1, cache);
  EXPECT_THROW(stepper->forward_step(1, cache), Error);  // past the context of 8
}

TEST(LanguageModelFile, FutureSeeingOrMisplacedLayersAreRefusedWhereTheyAre) {
  const std::pair<const char*, const char*> cases[] = {
      {"layers:\n  - embedding: {dim: 8}\n  - encoder: {heads: 2}\n  - lm_head\n",
       "lm.yaml:3:14: encoder in a language model"},  // at its parameters
      {"layers:\n  - embedding: {dim: 8}\n  - encoder: {heads: 2}\n  - lm_head\n", "use decoder"},
      {"layers:\n  - embedding: {dim: 8}\n  - global_avgpool\n  - lm_head\n", "global_avgpool in a language model"},
      {"layers:\n  - embedding: {dim: 8}\n  - residual: [gelu]\n  - lm_head\n", "residual in a language model"},
      {"layers:\n  - embedding: {dim: 8}\n  - lm_head\n  - lm_head\n", "lm_head after lm_head"},
      {"layers:\n  - decoder\n  - lm_head\n", "starts with embedding"},
      {"layers:\n  - embedding: {dim: 8}\n  - decoder: {heads: 3}\n  - lm_head\n", "heads: 3 does not divide the width 8"},
      {"layers:\n  - embedding: {dim: 8}\n  - lm_head: {tide: false}\n", "did you mean 'tied'"},
  };
  for (const auto& [file, message] : cases) EXPECT_NE(error_of(file).find(message), std::string::npos) << file;
  // lm_head in a classifier (not its last layer), and a language model given images.
  auto classifier = build_model_file("layers:\n  - embedding: {dim: 8}\n  - lm_head\n  - global_avgpool\n  - linear: {out: classes}\n",
                                     "c.yaml", 1, 1, 16, 3, nullptr, kMaxModelFileParameters, true);
  ASSERT_FALSE(classifier.is_ok());
  EXPECT_NE(classifier.status().message().find("lm_head ends a language model"), std::string::npos);
  auto on_images = build_model_file(kTinyLm, "lm.yaml", 1, 28, 28, 10);
  ASSERT_FALSE(on_images.is_ok());
  EXPECT_NE(on_images.status().message().find("--dataset kjv or --dataset text"), std::string::npos);
  // A text classifier's positions: `context` may exceed its texts' length, never fall short.
  auto short_context = build_model_file("layers:\n  - embedding: {dim: 8, context: 4}\n  - global_avgpool\n"
                                        "  - linear: {out: classes}\n",
                                        "c.yaml", 1, 1, 16, 3, nullptr, kMaxModelFileParameters, true);
  ASSERT_FALSE(short_context.is_ok());
  EXPECT_NE(short_context.status().message().find("context: 4 positions, but the texts here have 16 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::nn
