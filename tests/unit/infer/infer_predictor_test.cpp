// infer_predictor_test.cpp: infer::Predictor opens a checkpoint written here (a small model file
// network, its normalisation and class names recorded as a training run records them) and
// must answer what the same module answers when run directly, with the normalisation and
// the softmax computed by hand in this file; a language model's next-byte probabilities are
// its forward()'s last position, likewise. Also top_indices' order and ties, byte_name, and the
// inference precision names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/autograd/autograd.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/infer/infer.h"
#include "mixprec/nn/models.h"
#include "mixprec/nn/nn.h"
#include "mixprec/train/train_config.h"
#include "mixprec/train/train_data.h"

namespace mixprec::infer {
namespace {

namespace fs = std::filesystem;

// 2 channels of 1x3 values, 4 classes: flatten, linear 6->5, gelu, linear 5->4.
constexpr const char* kClassifierYaml = R"(name: tiny
layers:
  - flatten
  - linear: {out: 5}
  - gelu
  - linear: {out: classes}
)";

// A byte-level language model of context 8.
constexpr const char* kLanguageModelYaml = R"(name: tiny-lm
layers:
  - embedding: {dim: 16, context: 8}
  - decoder: {heads: 2}
  - layernorm
  - lm_head
)";

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "mixprec_infer_predictor_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

// The module the checkpoint holds (weights from a fixed seed) and the checkpoint written
// from it, as a run with this configuration would write it.
struct SavedModel {
  std::shared_ptr<nn::Module> module;
  std::string path;
};

SavedModel save_model(const train::TrainConfig& config, const std::string& file, uint64_t seed) {
  auto spec = train::model_spec_of(config);
  EXPECT_TRUE(spec.is_ok()) << spec.status().message();
  manual_seed(seed);
  auto built = nn::build_model(*spec);
  EXPECT_TRUE(built.is_ok()) << built.status().message();
  SavedModel saved{std::move(built).value(), temp_path(file)};
  saved.module->eval();
  TrainingState state;
  state.model = saved.module->named_parameters();
  for (auto& b : saved.module->named_buffers()) state.model.push_back(b);
  state.config_json = train::config_to_json(config);
  state.precision = "fp32";
  state.model_name = config.model;
  const Status s = save_checkpoint(saved.path, state);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return saved;
}

train::TrainConfig classifier_config() {
  train::TrainConfig config;
  config.model = "tiny.yaml";
  config.model_text = kClassifierYaml;
  config.dataset = "synthetic";
  config.input_channels = 2;
  config.input_height = 1;
  config.input_width = 3;
  config.num_classes = 4;
  config.norm_mean = {0.5, -1.0};
  config.norm_std = {2.0, 0.25};
  config.class_names = {"ant", "bee", "cat", "dog"};
  return config;
}

// softmax in double, written out: exp(l - max) / sum.
std::vector<double> softmax_by_hand(const std::vector<double>& logits) {
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(logits[i] - top);
  for (double& v : p) v /= total;
  return p;
}

TEST(Predictor, ClassProbabilitiesAreTheModuleOnHandNormalisedInputs) {
  const train::TrainConfig config = classifier_config();
  const SavedModel saved = save_model(config, "classifier.safetensors", 7);
  auto predictor = Predictor::open(saved.path, "");
  ASSERT_TRUE(predictor.is_ok()) << predictor.status().message();
  EXPECT_EQ(predictor->loaded().preset.name, "fp32");  // the checkpoint's precision
  EXPECT_EQ(predictor->mean(), config.norm_mean);
  EXPECT_EQ(predictor->stddev(), config.norm_std);
  ASSERT_EQ(predictor->layout().values_per_sample(), 6);

  // Three samples as the datasets store them (2 channels x 3 values each, back to back).
  const std::vector<float> samples = {0.0f, 0.25f, 1.0f, -0.5f, 0.75f, 2.0f,   //
                                      1.0f, 1.0f,  1.0f, 1.0f,  1.0f,  1.0f,   //
                                      -3.0f, 0.5f, 0.1f, -1.0f, -1.25f, 0.0f};
  const auto probs = predictor->probabilities(samples, 3);
  ASSERT_EQ(probs.size(), 3u);

  std::vector<float> normalised(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const size_t channel = (i / 3) % 2;
    normalised[i] = float((double(samples[i]) - config.norm_mean[channel]) / config.norm_std[channel]);
  }
  Tensor logits;
  {
    NoGradGuard no_grad;
    logits = saved.module->forward(Tensor::from_vector(normalised, {3, 2, 1, 3}));
  }
  const std::vector<double> all = logits.to(DType::f64).to_vector_f64();
  ASSERT_EQ(all.size(), 12u);
  for (size_t n = 0; n < 3; ++n) {
    const std::vector<double> expected = softmax_by_hand({all.begin() + n * 4, all.begin() + n * 4 + 4});
    ASSERT_EQ(probs[n].size(), 4u);
    for (size_t c = 0; c < 4; ++c) EXPECT_NEAR(probs[n][c], expected[c], 1e-6) << "sample " << n << " class " << c;
  }
  // The samples differ, so must their answers: a predictor ignoring its input would not.
  EXPECT_NE(probs[0], probs[1]);

  // top() names the classes as the run named them, most probable first.
  const std::vector<TopClass> top = predictor->top(probs[2], 2);
  ASSERT_EQ(top.size(), 2u);
  const std::vector<int64_t> order = top_indices(probs[2], 4);
  EXPECT_EQ(top[0].index, order[0]);
  EXPECT_EQ(top[0].name, config.class_names[size_t(order[0])]);
  EXPECT_EQ(top[1].name, config.class_names[size_t(order[1])]);
  EXPECT_DOUBLE_EQ(top[0].probability, probs[2][size_t(order[0])]);
}

TEST(Predictor, SamplesOfTheWrongSizeAreRefused) {
  const SavedModel saved = save_model(classifier_config(), "sizes.safetensors", 3);
  auto predictor = Predictor::open(saved.path, "");
  ASSERT_TRUE(predictor.is_ok()) << predictor.status().message();
  try {
    predictor->probabilities(std::vector<float>(11, 0.0f), 2);  // 2 samples need 12 values
    FAIL() << "11 values for 2 samples of 6 were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("expected 6 per sample"), std::string::npos) << e.what();
  }
}

TEST(Predictor, Bf16CastsTheWeightsOnceAsO2Does) {
  const SavedModel saved = save_model(classifier_config(), "bf16.safetensors", 5);
  auto f32 = Predictor::open(saved.path, "fp32");
  auto bf16 = Predictor::open(saved.path, "bf16");
  ASSERT_TRUE(f32.is_ok() && bf16.is_ok());
  EXPECT_EQ(bf16->loaded().preset.name, "o2-bf16");
  const int64_t params = 6 * 5 + 5 + 5 * 4 + 4;
  EXPECT_EQ(f32->parameter_count(), params);
  EXPECT_EQ(f32->weight_bytes(), 4 * params);
  EXPECT_EQ(bf16->weight_bytes(), 2 * params);  // no normalisation layer kept in f32 here
  // Rounded weights, the same answer to within bf16's precision.
  const std::vector<float> sample = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  const auto a = f32->probabilities(sample, 1)[0], b = bf16->probabilities(sample, 1)[0];
  for (size_t c = 0; c < a.size(); ++c) EXPECT_NEAR(a[c], b[c], 0.02);
}

TEST(Predictor, AnUnknownPrecisionIsAUsageErrorNamingIt) {
  const SavedModel saved = save_model(classifier_config(), "precision.safetensors", 5);
  auto predictor = Predictor::open(saved.path, "fp8");
  ASSERT_FALSE(predictor.is_ok());
  EXPECT_EQ(predictor.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(predictor.status().message().find("'fp8'"), std::string::npos) << predictor.status().message();
}

TEST(Predictor, LanguageModelGivesItsForwardsLastPosition) {
  train::TrainConfig config;
  config.model = "tiny-lm.yaml";
  config.model_text = kLanguageModelYaml;
  config.dataset = "text";
  const SavedModel saved = save_model(config, "lm.safetensors", 11);
  auto predictor = Predictor::open(saved.path, "");
  ASSERT_TRUE(predictor.is_ok()) << predictor.status().message();
  ASSERT_TRUE(predictor->spec().language_model);
  const int64_t context = predictor->layout().width;
  ASSERT_EQ(context, 8);

  // Two prompts of different lengths in one batch; the longer is cut to its last 8 bytes.
  const std::string short_prompt = "abc", long_prompt = "0123456789AB";
  std::vector<float> samples = next_byte_sample(short_prompt, context);
  const std::vector<float> second = next_byte_sample(long_prompt, context);
  samples.insert(samples.end(), second.begin(), second.end());
  EXPECT_EQ(second[0], 8.0f);
  EXPECT_EQ(second[1], float('4'));  // "456789AB"
  const auto probs = predictor->probabilities(samples, 2);
  ASSERT_EQ(probs.size(), 2u);

  const std::vector<std::string> seen = {"abc", "456789AB"};
  for (size_t i = 0; i < 2; ++i) {
    std::vector<int64_t> ids;
    for (unsigned char c : seen[i]) ids.push_back(c);
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = saved.module->forward(Tensor::from_vector_i64(ids, {1, int64_t(ids.size())}));
    }
    const std::vector<double> all = logits.to(DType::f64).to_vector_f64();
    const size_t last = (ids.size() - 1) * 256;
    const std::vector<double> expected = softmax_by_hand({all.begin() + last, all.begin() + last + 256});
    ASSERT_EQ(probs[i].size(), 256u);
    for (size_t b = 0; b < 256; ++b) EXPECT_NEAR(probs[i][b], expected[b], 1e-6) << "prompt " << i << " byte " << b;
  }
  // A language model's classes are bytes, named as a reader would.
  const std::vector<TopClass> top = predictor->top(probs[0], 1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].name, byte_name(top[0].index));

  // An empty prompt has no last position to answer from.
  EXPECT_THROW(predictor->probabilities(next_byte_sample("", context), 1), Error);
}

TEST(TopIndices, LargestFirstTiesInIndexOrder) {
  const std::vector<float> row = {0.1f, 0.3f, 0.2f, 0.3f, 0.05f, 0.3f};
  EXPECT_EQ(top_indices(row, 6), (std::vector<int64_t>{1, 3, 5, 2, 0, 4}));
  EXPECT_EQ(top_indices(row, 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(top_indices(row, 100), (std::vector<int64_t>{1, 3, 5, 2, 0, 4}));  // clamped
  EXPECT_TRUE(top_indices(row, 0).empty());
  EXPECT_TRUE(top_indices(row, -1).empty());
  EXPECT_TRUE(top_indices({}, 3).empty());
}

TEST(ByteName, PrintableQuotedOthersInHex) {
  EXPECT_EQ(byte_name('e'), "'e'");
  EXPECT_EQ(byte_name(' '), "' '");
  EXPECT_EQ(byte_name('\n'), "'\\n'");
  EXPECT_EQ(byte_name('\t'), "'\\t'");
  EXPECT_EQ(byte_name('\''), "'\\''");
  EXPECT_EQ(byte_name(0xc3), "0xc3");
  EXPECT_EQ(byte_name(0), "0x00");
  EXPECT_EQ(byte_name(127), "0x7f");
}

TEST(InferencePresetName, HalfNamesMeanCastWeights) {
  EXPECT_EQ(inference_preset_name("bf16"), "o2-bf16");
  EXPECT_EQ(inference_preset_name("fp16"), "o2-fp16");
  EXPECT_EQ(inference_preset_name("fp32"), "fp32");
  EXPECT_EQ(inference_preset_name("amp-bf16"), "amp-bf16");  // a preset passes through
  EXPECT_EQ(inference_preset_name(""), "");                  // the checkpoint's own
}

}  // namespace
}  // namespace mixprec::infer
