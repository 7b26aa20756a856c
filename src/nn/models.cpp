// models.cpp: the CNN, MLP and transformer used by the CLI, benchmarks and golden tests.
#include "mixprec/nn/models.h"

#include "mixprec/amp/amp.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/ops/ops_fused.h"

namespace mixprec::nn {

Cnn::Cnn(int64_t in_channels, int64_t height, int64_t width, int64_t classes) {
  conv1 = register_module("conv1", std::make_shared<Conv2d>(in_channels, 32, 3, 1, 1));
  conv2 = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3, 1, 1));
  // Two 2x2 pools: spatial size / 4 (floor), as PyTorch's MaxPool2d(2).
  fc1 = register_module("fc1", std::make_shared<Linear>(64 * (height / 4) * (width / 4), 256));
  fc2 = register_module("fc2", std::make_shared<Linear>(256, classes));
}

Tensor Cnn::forward(const Tensor& input) {
  // relu_max_pool2d == max_pool2d(relu(.), 2) in values and gradients, in one fused pass
  // (oneDNN's separate relu + pool cost as much as the convolutions in bf16).
  // conv1 + relu + pool is one fused pass when it is the first layer (conv2d_relu_max_pool2d).
  Tensor x = conv2d_relu_max_pool2d(input, conv1->weight, conv1->bias, conv1->stride, conv1->padding, 2);
  x = relu_max_pool2d((*conv2)(x), 2);
  x = relu((*fc1)(flatten(x, 1)));
  return (*fc2)(x);
}

Mlp::Mlp(int64_t in_features, int64_t hidden, int64_t classes) {
  fc1 = register_module("fc1", std::make_shared<Linear>(in_features, hidden));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, hidden));
  fc3 = register_module("fc3", std::make_shared<Linear>(hidden, classes));
}

Tensor Mlp::forward(const Tensor& input) {
  Tensor x = input.dim() == 2 ? input : flatten(input, 1);
  x = relu((*fc1)(x));
  x = relu((*fc2)(x));
  return (*fc3)(x);
}

TransformerClassifier::TransformerClassifier(int64_t seq_, int64_t features_, int64_t classes,
                                             int64_t d_model, int64_t heads, int64_t ffn)
    : seq(seq_), features(features_) {
  if (features != d_model)
    input_proj = register_module("input_proj", std::make_shared<Linear>(features, d_model));
  encoder = register_module("encoder", std::make_shared<TransformerEncoderLayer>(d_model, heads, ffn));
  fc = register_module("fc", std::make_shared<Linear>(d_model, classes));
}

Tensor TransformerClassifier::forward(const Tensor& input) {
  // [B, 1, S, W] images or [B, S, W] token sequences.
  const bool image = input.dim() == 4 && input.size(1) == 1;
  if (!(image || input.dim() == 3) || input.size(-2) != seq || input.size(-1) != features)
    throw Error(Status::invalid_argument(
        "TransformerClassifier: input " + shape_str(input.shape()) + " does not fit (expected [B, 1, " +
        std::to_string(seq) + ", " + std::to_string(features) + "] or [B, " + std::to_string(seq) +
        ", " + std::to_string(features) + "])"));
  Tensor x = reshape(input, {input.size(0), seq, features});
  if (input_proj) x = linear_over_tokens(*input_proj, x);
  x = (*encoder)(x);  // [B, S, E]
  return (*fc)(mean_over_positions(x));  // [B, E] -> [B, classes]
}

StatusOr<ModelSpec> model_spec(const std::string& name) {
  if (name == "cnn") return ModelSpec{name, 1, 28, 28, 10};
  if (name == "seed-cnn") return ModelSpec{name, 3, 32, 32, 10};
  if (name == "mlp") return ModelSpec{name, 1, 28, 28, 10};
  if (name == "transformer") return ModelSpec{name, 1, 128, 256, 10};  // seq 128, 256 features
  if (name == "resnet20") return ModelSpec{name, 1, 28, 28, 10};
  if (name == "resnet20-cifar") return ModelSpec{name, 3, 32, 32, 10};
  // Language models: windows of context + 1 bytes, 256 classes (the next byte).
  if (name == "gpt-tiny") return ModelSpec{name, 1, 1, 128 + 1, 256, /*language_model=*/true};
  if (name == "gpt") return ModelSpec{name, 1, 1, 256 + 1, 256, /*language_model=*/true};
  std::string list;
  for (const std::string& n : model_names()) list += (list.empty() ? "" : ", ") + n;
  return Status::invalid_argument("unknown model '" + name + "' (expected one of: " + list + ")");
}

StatusOr<std::shared_ptr<Module>> build_model(const ModelSpec& spec) {
  if (spec.factory) {
    auto m = spec.factory();
    if (!m) return Status::invalid_argument("the custom model factory returned no model");
    return m;
  }
  if (spec.file_text.empty()) return make_model(spec);
  if (spec.language_model)  // windows of context + 1 bytes: the model reads the first context
    return build_model_file(spec.file_text, spec.name, 1, 1, spec.width - 1, spec.classes, nullptr,
                            kMaxModelFileParameters, /*token_input=*/true);
  return build_model_file(spec.file_text, spec.name, spec.channels, spec.height, spec.width, spec.classes, nullptr,
                          kMaxModelFileParameters, spec.token_input);
}

std::shared_ptr<Module> make_model(const ModelSpec& spec) {
  if (!spec.file_text.empty() || spec.factory) return build_model(spec).value();
  if (spec.name == "transformer")
    return std::make_shared<TransformerClassifier>(spec.height, spec.width, spec.classes);
  if (spec.name == "gpt-tiny") return std::make_shared<Gpt>(spec.width - 1, 4, 128, 4, spec.classes);
  if (spec.name == "gpt") return std::make_shared<Gpt>(spec.width - 1, 6, 384, 6, spec.classes);
  if (spec.name == "resnet20" || spec.name == "resnet20-cifar")
    return std::make_shared<ResNet>(spec.channels, spec.classes, /*blocks_per_stage=*/3, /*width=*/16);
  if (spec.name == "mlp")
    return std::make_shared<Mlp>(spec.channels * spec.height * spec.width, 4096, spec.classes);
  return std::make_shared<Cnn>(spec.channels, spec.height, spec.width, spec.classes);
}

}  // namespace mixprec::nn
