// model_file.cpp: a model file's plan (model_plan.h) built from the nn layers.
#include "mixprec/model_file.h"

#include "io/yaml_json.h"
#include "mixprec/files.h"
#include "mixprec/nn_attention.h"
#include "nn/model_plan.h"

namespace mixprec::nn {
namespace {

std::shared_ptr<Sequential> build_block(const std::vector<LayerPlan>& plans);

std::shared_ptr<Module> build_layer(const LayerPlan& p) {
  std::shared_ptr<Module> m;
  if (p.type == "conv2d") m = std::make_shared<Conv2d>(p.in, p.out, p.kernel, p.stride, p.padding, p.bias);
  else if (p.type == "linear") m = std::make_shared<Linear>(p.in, p.out, p.bias);
  else if (p.type == "maxpool2d") m = std::make_shared<MaxPool2d>(p.kernel, p.stride, p.padding);
  else if (p.type == "batchnorm2d") m = std::make_shared<BatchNorm2d>(p.in, p.eps, p.momentum);
  else if (p.type == "layernorm") m = std::make_shared<LayerNorm>(Shape{p.in}, p.eps);  // the last dim
  else if (p.type == "dropout") m = std::make_shared<Dropout>(p.p);
  else if (p.type == "relu") m = std::make_shared<ReLU>();
  else if (p.type == "gelu") m = std::make_shared<GELU>();
  else if (p.type == "flatten") m = std::make_shared<Flatten>();
  else if (p.type == "sequence") m = std::make_shared<Flatten>(1, 2);  // [N, C, H, W] -> [N, C*H, W]
  else if (p.type == "global_avgpool" && p.input_shape.size() == 2) m = std::make_shared<SequenceMeanPool>();
  else if (p.type == "global_avgpool") m = std::make_shared<GlobalAvgPool>();
  else if (p.type == "embedding") m = std::make_shared<TokenEmbedding>(256, p.in, p.out);
  else if (p.type == "encoder")
    m = std::make_shared<TransformerEncoderLayer>(p.in, p.heads, p.out, p.p, Activation::gelu, p.eps);
  else if (p.type == "residual")
    m = std::make_shared<Residual>(build_block(p.body), p.shortcut.empty() ? nullptr : build_block(p.shortcut));
  else throw Error(Status::internal("model file: a planned layer of unknown type '" + p.type + "'"));
  if (p.precision == "fp32") m->set_autocast(false);  // and its input cast to f32 (Module::operator())
  return m;
}

std::shared_ptr<Sequential> build_block(const std::vector<LayerPlan>& plans) {
  auto seq = std::make_shared<Sequential>();
  for (const LayerPlan& p : plans) seq->add(p.name, build_layer(p));
  return seq;
}

}  // namespace

bool model_file_reads_text(const std::string& text) {
  auto doc = io::yaml_to_json(text, "model file", nullptr);
  if (!doc.is_ok() || !doc->is_object() || !doc->contains("layers")) return false;
  const auto& layers = (*doc)["layers"];
  if (!layers.is_array() || layers.empty()) return false;
  const auto& first = layers[0];
  return (first.is_string() && first == "embedding") || (first.is_object() && first.contains("embedding"));
}

StatusOr<std::string> read_model_file(const std::string& path) {
  return io::read_regular_file(path, "model file", uint64_t(1) << 20);
}

StatusOr<std::shared_ptr<Module>> build_model_file(const std::string& text, const std::string& source,
                                                   int64_t channels, int64_t height, int64_t width, int64_t classes,
                                                   std::vector<ModelFileLayer>* layers, int64_t max_parameters,
                                                   bool token_input) {
  auto plan = plan_model_file(text, source, channels, height, width, classes, layers, max_parameters, token_input);
  if (!plan.is_ok()) return plan.status();
  return std::shared_ptr<Module>(build_block(*plan));
}

}  // namespace mixprec::nn
