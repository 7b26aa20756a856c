// model_file_test.cpp: networks from model files (model_file.h). models/cnn.yaml is the
// built-in cnn: the same parameter names and shapes, the same initial weights for a seed and
// bit-identical outputs; the example files build for several input shapes; blocks, repeats,
// residuals and per-layer precision become the modules they say; every mistake in a file is
// an error at its file:line:column, with a suggestion for a misspelt name and both shapes
// for a shape mismatch.
#include <gtest/gtest.h>

#include "common/source_file.h"

#include <fstream>
#include <sstream>

#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"

namespace mixprec::nn {
namespace {

std::string repo_file(const std::string& name) { return test::source_file(name); }

std::string error_of(const std::string& text, int64_t c = 1, int64_t h = 8, int64_t w = 8, int64_t classes = 3) {
  auto m = build_model_file(text, "net.yaml", c, h, w, classes);
  return m.is_ok() ? "accepted" : m.status().message();
}

// A model file built for a built-in model's input, with the same seed as the built-in: the
// same parameter names, the same initial weights and the same outputs.
void expect_same_as_builtin(const std::string& file, const std::string& builtin_name, uint64_t seed) {
  SCOPED_TRACE(file + " as " + builtin_name);
  const ModelSpec spec = model_spec(builtin_name).value();
  manual_seed(seed);
  auto built = build_model_file(repo_file(file), file, spec.channels, spec.height, spec.width, spec.classes);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  manual_seed(seed);
  auto builtin = make_model(spec);
  const auto a = (*built)->named_parameters(), b = builtin->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.shape(), b[i].second.shape());
    EXPECT_EQ(a[i].second.to_vector_f64(), b[i].second.to_vector_f64()) << a[i].first;
  }
  manual_seed(9);
  const Tensor x = Tensor::normal({3, spec.channels, spec.height, spec.width}, 0, 1);
  EXPECT_EQ((**built)(x).to_vector_f64(), (*builtin)(x).to_vector_f64());
}

// On 1x28x28 images cnn.yaml is the built-in cnn; on 3x32x32 (CIFAR-10, synthetic colour)
// the built-in seed-cnn, which is the same network.
TEST(ModelFile, TheCnnFileIsTheBuiltInCnnAndSeedCnn) {
  expect_same_as_builtin("models/cnn.yaml", "cnn", 5);
  expect_same_as_builtin("models/cnn.yaml", "seed-cnn", 5);
}

TEST(ModelFile, TheWideMlpFileIsTheBuiltInMlp) { expect_same_as_builtin("models/wide-mlp.yaml", "mlp", 6); }

TEST(ModelFile, ExampleFilesBuildForImagesAndTables) {
  for (const char* name : {"models/cnn.yaml", "models/small-resnet.yaml", "models/mlp.yaml"}) {
    SCOPED_TRACE(name);
    for (const auto& [c, h, w] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 28, 28}, {3, 32, 32}, {3, 17, 23}}) {
      auto m = build_model_file(repo_file(name), name, c, h, w, 7);
      ASSERT_TRUE(m.is_ok()) << m.status().message();
      EXPECT_EQ((**m)(Tensor::normal({2, c, h, w}, 0, 1)).shape(), (std::vector<int64_t>{2, 7}));
    }
  }
  auto table = build_model_file(repo_file("models/mlp.yaml"), "mlp.yaml", 4, 1, 1, 3);  // 4 columns
  ASSERT_TRUE(table.is_ok()) << table.status().message();
  EXPECT_EQ((**table)(Tensor::normal({5, 4, 1, 1}, 0, 1)).shape(), (std::vector<int64_t>{5, 3}));
}

TEST(ModelFile, BlocksRepeatsResidualsAndPrecisionBecomeModules) {
  const std::string text = R"(
layers:
  - conv2d: {out: 4, kernel: 3, padding: 1}
    name: stem
  - repeat: 2
    layers:
      - residual:
          - conv2d: {out: 4, kernel: 3, padding: 1}
          - batchnorm2d
  - global_avgpool
  - linear: {out: classes}
    precision: fp32
)";
  std::vector<ModelFileLayer> rows;
  auto m = build_model_file(text, "net.yaml", 2, 6, 6, 3, &rows);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  std::vector<std::string> names;
  for (const auto& [n, t] : (*m)->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"stem.weight", "stem.bias", "1.body.0.weight", "1.body.0.bias",
                                              "1.body.1.weight", "1.body.1.bias", "2.body.0.weight", "2.body.0.bias",
                                              "2.body.1.weight", "2.body.1.bias", "4.weight", "4.bias"}));
  const auto& children = (*m)->children();
  ASSERT_EQ(children.size(), 5u);
  EXPECT_STREQ(children[1].second->type_name(), "Residual");
  EXPECT_EQ(children[4].second->autocast_override(), std::optional<bool>(false));
  EXPECT_FALSE(children[0].second->autocast_override().has_value());
  ASSERT_EQ(rows.size(), 9u);  // stem, 2 x (residual, conv, bn), global_avgpool, linear
  EXPECT_EQ(rows[0].output_shape, (std::vector<int64_t>{4, 6, 6}));
  EXPECT_EQ(rows[1].type, "residual");
  EXPECT_EQ(rows[2].name, "1.body.0");
  EXPECT_EQ(rows[2].depth, 1);
  // x + f(x): the residual adds its input back.
  auto r = std::dynamic_pointer_cast<Residual>(children[1].second);
  ASSERT_TRUE(r);
  const Tensor x = Tensor::normal({1, 4, 6, 6}, 0, 1);
  const std::vector<double> sum = add(x, (*r->body)(x)).to_vector_f64(), got = (*r)(x).to_vector_f64();
  EXPECT_EQ(got, sum);
}

TEST(ModelFile, MistakesPointIntoTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"layers:\n  - conv2d: {out: 4}\n  - relu\n  - flaten\n", "net.yaml:4:5: unknown layer type 'flaten' (did you mean 'flatten'?)"},
      {"layers:\n  - conv2d: {out: 4, kernal: 3}\n", "net.yaml:2:30: conv2d has no parameter 'kernal' (did you mean 'kernel'?)"},
      {"layers:\n  - conv2d: {out: 4}\n  - linear: {out: classes}\n",
       "net.yaml:3:13: linear takes flat features [F]; its input here is [4, 6, 6]: put flatten or global_avgpool before it"},
      {"layers:\n  - residual:\n      - conv2d: {out: 5, padding: 1}\n  - flatten\n",
       "net.yaml:2:5: residual block '0': its layers turn [1, 8, 8] into [5, 8, 8]"},
      {"layers:\n  - flatten\n  - linear: {out: 10}\n", "the last layer outputs [10] per sample; a classifier of 3 classes must end in [3]"},
      {"layers:\n  - flatten\n  - linear: {out: classes}\n    precision: bf16\n", "net.yaml:4:16: precision: expected fp32"},
      {"layers:\n  - conv2d: {out: 0}\n", "net.yaml:2:19: out: expected an integer in 1..65536 or classes, got 0"},
      {"layers:\n  - conv2d: {kernel: 3}\n", "net.yaml:2:13: needs out: N (or classes)"},
      {"layers:\n  - conv2d: {out: 4, kernel: 9}\n", "conv2d: a 9x9 kernel does not fit the input [1, 8, 8]"},
      {"layers:\n  - repeat: 0\n    layers: [relu]\n", "net.yaml:2:13: repeat: expected an integer in 1..256"},
      {"layers:\n  - relu: {}\n    name: a\n  - relu: {}\n    name: a\n", "two layers named 'a' in one block"},
      {"layerz:\n  - relu\n", "unknown key 'layerz' (did you mean 'layers'?)"},
      {"layers: [relu, {linear: {out: 3}, conv2d: {out: 3}}]\n", "a layer has one type"},
      {"layers:\n  - dropout: {p: 1}\n", "p: expected a number in [0.000000, 1.000000)"},
      {"{\"layers\": [\"flatten\", {\"linear\": {\"out\": \"many\"}}]}", "net.yaml:1:43: out: expected an integer"},
      {"layers: [\n", "net.yaml:2:1: YAML"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    const std::string got = error_of(text);
    if (want.size() > 4 && want.compare(want.size() - 3, 3, "...") == 0)
      EXPECT_EQ(got.rfind(want.substr(0, want.size() - 4), 0), 0u) << got;
    else
      EXPECT_NE(got.find(want), std::string::npos) << got;
  }
  // The residual mismatch names both shapes.
  const std::string residual = error_of("layers:\n  - residual:\n      - conv2d: {out: 5, padding: 1}\n");
  EXPECT_NE(residual.find("turn [1, 8, 8] into [5, 8, 8]"), std::string::npos) << residual;
}

TEST(ModelFile, TextEncoderFileReadsByteIds) {
  // models/text-encoder.yaml for texts of 16 bytes and 5 classes: the planned parameter count
  // is the built modules' (token and position embeddings, two encoder layers, the head).
  std::vector<ModelFileLayer> rows;
  auto m = build_model_file(repo_file("models/text-encoder.yaml"), "text-encoder.yaml", 1, 1, 16, 5, &rows,
                            kMaxModelFileParameters, /*token_input=*/true);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  int64_t planned = 0;
  for (const ModelFileLayer& r : rows)
    if (r.depth == 0) planned += r.parameters;
  EXPECT_EQ(planned, (*m)->num_parameters());
  EXPECT_EQ(rows[0].output_shape, (std::vector<int64_t>{16, 128}));
  EXPECT_EQ((256 + 16) * 128, rows[0].parameters);
  const Tensor ids = Tensor::from_vector_i64({72, 105, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,   //
                                              97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112},
                                             {2, 16});
  EXPECT_EQ((**m)(ids).shape(), (std::vector<int64_t>{2, 5}));
  // Parameter names a PyTorch user can map: 0.tokens.weight, 1.self_attn.in_proj_weight, ...
  const auto named = (*m)->named_parameters();
  EXPECT_EQ(named[0].first, "0.tokens.weight");
  EXPECT_EQ(named[1].first, "0.positions.weight");
  EXPECT_EQ(named[2].first, "1.self_attn.in_proj_weight");
}

TEST(ModelFile, TextLayerMistakesAreNamed) {
  auto text_error = [](const std::string& text) {
    auto m = build_model_file(text, "net.yaml", 1, 1, 8, 3, nullptr, kMaxModelFileParameters, true);
    return m.is_ok() ? std::string("accepted") : m.status().message();
  };
  EXPECT_NE(text_error("layers: [flatten, {linear: {out: classes}}]")
                .find("flatten: the input is text as byte ids [8]; a text classifier or language model starts with embedding: {dim: N}"),
            std::string::npos);
  EXPECT_NE(text_error("layers: [{embedding: {dim: 6}}, {encoder: {heads: 4}}, global_avgpool, {linear: {out: classes}}]")
                .find("heads: 4 does not divide the width 6"),
            std::string::npos);
  EXPECT_NE(text_error("layers: [{embedding: {}}, global_avgpool, {linear: {out: classes}}]").find("needs dim: N"),
            std::string::npos);
  EXPECT_NE(text_error("layers: [{embedding: {dim: 8}}, {linear: {out: classes}}]")
                .find("linear takes flat features [F]; its input here is [8, 8]"),
            std::string::npos);
  // On images: an embedding, and an encoder without one, are refused with the shapes.
  EXPECT_NE(error_of("layers: [{embedding: {dim: 8}}]").find("embedding takes byte ids (--dataset csv --text-column"),
            std::string::npos);
  EXPECT_NE(error_of("layers: [flatten, encoder]").find("encoder takes a sequence [T, E] (after an embedding); its "
                                                        "input here is [64]"),
            std::string::npos);
}

TEST(ModelFile, TheResNet20FileIsTheBuiltInResNet20) {
  // Same layers in the same order (projection shortcuts included): with the built-in's
  // parameters and running statistics copied over in order, the same outputs, in training
  // (batch statistics) and evaluation (running statistics) mode.
  auto file = build_model_file(repo_file("models/resnet20.yaml"), "resnet20.yaml", 1, 28, 28, 10);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  manual_seed(3);
  auto builtin = make_model(model_spec("resnet20").value());
  const auto a = (*file)->named_parameters(), b = builtin->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ((*file)->num_parameters(), 272186);
  {
    NoGradGuard ng;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].second.shape(), b[i].second.shape()) << a[i].first << " vs " << b[i].first;
      Tensor dst = a[i].second;
      dst.copy_(b[i].second);
    }
    const auto fa = (*file)->named_buffers(), fb = builtin->named_buffers();
    ASSERT_EQ(fa.size(), fb.size());
    for (size_t i = 0; i < fa.size(); ++i) {
      Tensor dst = fa[i].second;
      dst.copy_(fb[i].second);
    }
  }
  EXPECT_EQ(a[3].first, "3.body.0.weight");  // the first block's first convolution
  manual_seed(9);
  const Tensor x = Tensor::normal({4, 1, 28, 28}, 0, 1);
  const std::vector<double> train_a = (**file)(x).to_vector_f64(), train_b = (*builtin)(x).to_vector_f64();
  (*file)->eval();
  builtin->eval();
  const std::vector<double> eval_a = (**file)(x).to_vector_f64(), eval_b = (*builtin)(x).to_vector_f64();
  ASSERT_EQ(train_a.size(), train_b.size());
  for (size_t i = 0; i < train_a.size(); ++i) {
    EXPECT_NEAR(train_a[i], train_b[i], 1e-5 * (1 + std::abs(train_b[i]))) << i;
    EXPECT_NEAR(eval_a[i], eval_b[i], 1e-5 * (1 + std::abs(eval_b[i]))) << i;
  }
}

TEST(ModelFile, TheTransformerFileIsTheBuiltInTransformer) {
  // An image's rows as tokens, one encoder layer, the mean, a head: the built-in's parameters
  // in the same order; with them copied over, the same logits.
  auto file = build_model_file(repo_file("models/transformer.yaml"), "transformer.yaml", 1, 128, 256, 10);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto builtin = make_model(model_spec("transformer").value());
  const auto a = (*file)->named_parameters(), b = builtin->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ((*file)->num_parameters(), 792330);
  EXPECT_EQ(a[0].first, "1.self_attn.in_proj_weight");
  {
    NoGradGuard ng;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].second.shape(), b[i].second.shape()) << a[i].first << " vs " << b[i].first;
      Tensor dst = a[i].second;
      dst.copy_(b[i].second);
    }
  }
  manual_seed(4);
  const Tensor x = Tensor::normal({2, 1, 128, 256}, 0, 1);
  const std::vector<double> ya = (**file)(x).to_vector_f64(), yb = (*builtin)(x).to_vector_f64();
  ASSERT_EQ(ya.size(), yb.size());
  for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], yb[i], 1e-5 * (1 + std::abs(yb[i]))) << i;
  EXPECT_NE(error_of("layers: [flatten, sequence]").find("sequence takes images [C, H, W]; its input here is [64]"),
            std::string::npos);
}

TEST(ModelFile, ResidualShortcutMistakesAreNamed) {
  EXPECT_NE(error_of("layers:\n  - residual: {layers: [{conv2d: {out: 4, stride: 2, padding: 1}}]}\n")
                .find("(or a shortcut: [...] that gives [4, 4, 4])"),
            std::string::npos);
  EXPECT_NE(error_of("layers:\n  - residual:\n      layers: [{conv2d: {out: 4, stride: 2, padding: 1}}]\n"
                     "      shortcut: [{conv2d: {out: 4, kernel: 1}}]\n")
                .find("but its shortcut into [4, 8, 8]"),
            std::string::npos);
  EXPECT_NE(error_of("layers:\n  - residual: {layer: [relu]}\n").find("'layer' in a residual block (did you mean 'layers'?)"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::nn
