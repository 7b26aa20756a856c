// onnx_export_test.cpp: every model kind the CLI trains, exported to ONNX in each precision and
// run outside mixprec by tests/e2e/onnx_run.py's reference interpreter (numpy, written from
// the ONNX operator specification), whose logits must match mixprec's own forward pass:
//   fp32: mixprec in f32;
//   fp16: mixprec under the o2-fp16 preset (f16 weights and compute, normalisation in f32);
//   bf16: mixprec in f32 with its weights rounded to bf16 (what the bf16 export means).
// onnx_run.py also runs onnx.checker (full check) on each file. Parameters, including the
// normalisation layers' and BatchNorm's running statistics, are randomised so that a layer
// exported with the wrong affine terms or statistics shows. Needs Debian's python3-onnx and
// python3-numpy (scripts/setup installs them): without them the test fails, not skips.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"
#include "mixprec/export/onnx_export.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/amp/precision.h"
#include "nn/layer_type.h"

namespace mixprec {
namespace {

using onnx_export::ExportOptions;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/mixprec_onnx_export.XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

// A .npy file of f32 (descr <f4) or i64 (<i8) values.
void write_npy(const std::string& path, const Tensor& t) {
  const bool ints = t.dtype() == DType::i64;
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  shape += ")";
  std::string header = std::string("{'descr': '") + (ints ? "<i8" : "<f4") + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out << "\x93NUMPY" << char(1) << char(0) << char(header.size() & 0xff) << char(header.size() >> 8) << header;
  const Tensor c = t.contiguous();
  out.write(static_cast<const char*>(c.data()), std::streamsize(c.numel() * int64_t(dtype_size(c.dtype()))));
}

// Every parameter and buffer drawn at random (weights of normalisation layers around 1,
// running variances positive), so that nothing is left at an identity initialisation.
void randomise(nn::Module& model) {
  NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    const bool norm_weight = p.dim() == 1 && name.size() > 7 && name.substr(name.size() - 7) == ".weight";
    p.copy_(Tensor::uniform(p.shape(), norm_weight ? 0.5 : -0.3, norm_weight ? 1.5 : 0.3));
  }
  for (auto& [name, b] : model.named_buffers())
    b.copy_(name.find("running_var") != std::string::npos ? Tensor::uniform(b.shape(), 0.5, 2.0)
                                                          : Tensor::uniform(b.shape(), -0.5, 0.5));
}

struct Case {
  std::string label;
  nn::ModelSpec spec;
  std::shared_ptr<nn::Module> model;
  Tensor input;  // raw values (image models) or tokens
};

// mixprec's logits for the case at the precision (the reference the ONNX file must match).
Tensor reference_logits(Case& c, const std::string& precision, const ExportOptions& options) {
  NoGradGuard no_grad;
  Tensor x = c.input;
  const bool ids = c.spec.language_model || c.spec.token_input;
  if (!ids) {  // (x - mean) / std per channel, as predict and the graph do
    std::vector<float> v = x.to_vector();
    const int64_t per_channel = c.spec.height * c.spec.width;
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t ch = size_t((int64_t(i) / per_channel) % c.spec.channels);
      v[i] = float((double(v[i]) - options.mean[ch]) / options.stddev[ch]);
    }
    x = Tensor::from_vector(v, x.shape());
  }
  if (precision == "fp32") return (*c.model)(x).to(DType::f32);
  if (precision == "bf16") {  // f32 compute with bf16-rounded weights
    c.model->to(DType::bf16, /*keep_normalization_fp32=*/true);
    c.model->to(DType::f32);
    return (*c.model)(x).to(DType::f32);
  }
  const amp::Preset preset = amp::preset_by_name("o2-fp16").value();  // as `predict --precision fp16`
  c.model->to(preset.param_dtype, preset.keep_norm_fp32);
  std::optional<amp::AutocastGuard> autocast;
  if (preset.autocast_dtype) autocast.emplace(*preset.autocast_dtype);
  return (*c.model)(ids ? x : x.to(preset.param_dtype)).to(DType::f32);
}

// Exports, runs onnx_run.py's numpy runtime on the file and compares logits; returns its report.
void expect_round_trip(Case c, const std::string& precision, double rtol, double atol) {
  SCOPED_TRACE(c.label + " " + precision);
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  randomise(*c.model);
  c.model->eval();
  ExportOptions options;
  options.precision = precision == "fp16" ? DType::f16 : precision == "bf16" ? DType::bf16 : DType::f32;
  if (!c.spec.language_model)
    for (int64_t ch = 0; ch < c.spec.channels; ++ch) {
      options.mean.push_back(0.25 + 0.1 * double(ch));
      options.stddev.push_back(0.5 - 0.1 * double(ch));
    }
  const Status written = onnx_export::write_onnx(*c.model, c.spec, options, dir / "model.onnx");
  ASSERT_TRUE(written.is_ok()) << written.message();
  write_npy(dir / "input.npy", c.input);
  write_npy(dir / "expected.npy", reference_logits(c, precision, options));
  const std::string command = "/usr/bin/python3 " MIXPREC_SOURCE_DIR "/tests/e2e/onnx_run.py '" + (dir / "model.onnx") +
                              "' '" + (dir / "input.npy") + "' --runtime numpy --output logits --expected '" +
                              (dir / "expected.npy") + "' --rtol " + std::to_string(rtol) + " --atol " +
                              std::to_string(atol) + " > '" + (dir / "report.txt") + "' 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream report(dir / "report.txt");
  const std::string text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("max |diff|"), std::string::npos) << "no comparison was made: " << text;
}

Tensor image_input(int64_t n, int64_t c, int64_t h, int64_t w) { return Tensor::uniform({n, c, h, w}, 0.0, 1.0); }

Case cnn() {
  nn::ModelSpec spec{"cnn", 1, 12, 12, 5};
  return {"cnn", spec, std::make_shared<nn::Cnn>(1, 12, 12, 5), image_input(3, 1, 12, 12)};
}
Case mlp() {
  nn::ModelSpec spec{"mlp", 2, 5, 5, 4};
  return {"mlp", spec, std::make_shared<nn::Mlp>(50, 24, 4), image_input(3, 2, 5, 5)};
}
Case resnet() {
  nn::ModelSpec spec{"resnet", 2, 8, 8, 5};
  return {"resnet", spec, std::make_shared<nn::ResNet>(2, 5, /*blocks_per_stage=*/1, /*width=*/4), image_input(2, 2, 8, 8)};
}
Case transformer() {
  nn::ModelSpec spec{"transformer", 1, 6, 10, 5};
  return {"transformer", spec, std::make_shared<nn::TransformerClassifier>(6, 10, 5, 16, 4, 32), image_input(2, 1, 6, 10)};
}
Case gpt() {
  nn::ModelSpec spec{"gpt", 1, 1, 9, 256, /*language_model=*/true};
  // T = 5 of a context of 8: the graph slices positions and the causal mask to the input.
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 10; ++i) tokens.push_back((i * 37 + 11) % 256);
  return {"gpt", spec, std::make_shared<nn::Gpt>(8, 2, 16, 4), Tensor::from_vector_i64(tokens, {2, 5})};
}
Case model_file() {
  nn::ModelSpec spec{"file", 2, 8, 8, 5};
  spec.file_text = R"(layers:
  - conv2d: {out: 4, kernel: 3, padding: 1}
  - batchnorm2d
  - relu
  - residual:
      - conv2d: {out: 4, kernel: 3, padding: 1, bias: false}
      - batchnorm2d
  - residual:
      layers:
        - conv2d: {out: 6, kernel: 3, padding: 1, bias: false}
        - batchnorm2d
      shortcut:
        - conv2d: {out: 6, kernel: 1, bias: false}
        - batchnorm2d
  - maxpool2d: {kernel: 3, stride: 2, padding: 1}
  - flatten
  - linear: {out: 16}
  - layernorm
  - gelu
  - dropout: {p: 0.3}
  - linear: {out: classes}
    precision: fp32
)";
  return {"model file", spec, nn::build_model(spec).value(), image_input(3, 2, 8, 8)};
}

TEST(OnnxExport, Fp32GraphsMatchMixprecForEveryModelKind) {
  for (Case c : {cnn(), mlp(), resnet(), transformer(), gpt(), model_file()}) expect_round_trip(c, "fp32", 1e-4, 1e-5);
}

TEST(OnnxExport, Bf16WeightsMatchMixprecWithTheSameRoundedWeights) {
  for (Case c : {cnn(), resnet(), transformer(), gpt(), model_file()}) expect_round_trip(c, "bf16", 1e-4, 1e-5);
}

TEST(OnnxExport, Fp16GraphsMatchMixprecO2Fp16) {
  // Both round to f16 after each op; mixprec's kernels and the reference interpreter differ
  // in accumulation order, worth a few f16 ulps (GPT: 2.9e-3 worst seen; logits are ~1).
  for (Case c : {cnn(), mlp(), resnet(), transformer(), gpt(), model_file()}) expect_round_trip(c, "fp16", 1e-2, 1e-2);
}

// Each layer type's example model file (src/nn/layer_type.h), as train builds it: a new type's
// ONNX nodes are checked by being listed.
TEST(OnnxExport, EveryLayerTypesExampleMatchesMixprecInFp32AndFp16) {
  for (const nn::LayerType* t : nn::layer_types()) {
    const std::string text = t->example;
    nn::ModelSpec spec = nn::model_file_spec(std::string("example-") + t->name, text);
    if (spec.language_model) {  // context 8: 8 tokens
      spec.width = 9;
    } else if (spec.token_input) {
      spec.width = 8, spec.classes = 3;
    } else {
      spec.channels = 2, spec.height = 6, spec.width = 6, spec.classes = 3;
    }
    std::vector<int64_t> tokens;
    for (int64_t i = 0; i < 16; ++i) tokens.push_back((i * 37 + 11) % 256);
    const Tensor input = spec.language_model || spec.token_input ? Tensor::from_vector_i64(tokens, {2, 8})
                                                                 : image_input(2, 2, 6, 6);
    for (const char* precision : {"fp32", "fp16"}) {
      auto model = nn::build_model(spec);
      ASSERT_TRUE(model.is_ok()) << t->name << ": " << model.status().message();
      const bool fp32 = std::string(precision) == "fp32";  // tolerances as the tests above
      expect_round_trip({std::string("layer type ") + t->name, spec, *model, input}, precision, fp32 ? 1e-4 : 1e-2,
                        fp32 ? 1e-5 : 1e-2);
    }
  }
}

TEST(OnnxExport, Fp16AndBf16FilesAreHalfTheSize) {
  Case c = cnn();
  ExportOptions options;
  options.mean = {0.5};
  options.stddev = {0.25};
  auto f32 = onnx_export::export_onnx(*c.model, c.spec, options);
  options.precision = DType::f16;
  auto f16 = onnx_export::export_onnx(*c.model, c.spec, options);
  options.precision = DType::bf16;
  auto bf16 = onnx_export::export_onnx(*c.model, c.spec, options);
  ASSERT_TRUE(f32.is_ok() && f16.is_ok() && bf16.is_ok());
  const double weights = double(c.model->num_parameters()) * 4;
  EXPECT_GT(double(f32->size()), weights);
  EXPECT_LT(double(f16->size()), 0.51 * double(f32->size()));
  EXPECT_LT(double(bf16->size()), 0.51 * double(f32->size()));
}

class Unknown : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  const char* type_name() const override { return "Unknown"; }
};

TEST(OnnxExport, AnUnknownModuleIsNamedNotGuessed) {
  nn::Sequential model;
  model.add(std::make_shared<nn::Flatten>());
  model.add(std::make_shared<Unknown>());
  nn::ModelSpec spec{"custom", 1, 2, 2, 4};
  ExportOptions options;
  options.mean = {0.0};
  options.stddev = {1.0};
  auto bytes = onnx_export::export_onnx(model, spec, options);
  ASSERT_FALSE(bytes.is_ok());
  EXPECT_EQ(bytes.status().code(), StatusCode::unimplemented);
  EXPECT_NE(bytes.status().message().find("'1' is a Unknown"), std::string::npos) << bytes.status().message();
}

TEST(OnnxExport, NormalisationMustFitTheChannelsAndBeFinite) {
  Case c = cnn();
  ExportOptions options;  // none given for a 1-channel model
  auto none = onnx_export::export_onnx(*c.model, c.spec, options);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("0 means"), std::string::npos) << none.status().message();
  options.mean = {0.5};
  options.stddev = {0.0};
  auto zero = onnx_export::export_onnx(*c.model, c.spec, options);
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("std > 0"), std::string::npos) << zero.status().message();
}

TEST(OnnxExport, KeepsTheCallersTrainingMode) {
  Case c = resnet();
  c.model->train();
  ExportOptions options;
  options.mean = {0.5, 0.5};
  options.stddev = {0.25, 0.25};
  ASSERT_TRUE(onnx_export::export_onnx(*c.model, c.spec, options).is_ok());
  EXPECT_TRUE(c.model->is_training());
}

}  // namespace
}  // namespace mixprec
