// models.cpp: the CNN and MLP used by the CLI, benchmarks and golden tests.
#include "mixprec/models.h"

#include "mixprec/ops_fused.h"

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
  Tensor x = relu_max_pool2d((*conv1)(input), 2);
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

StatusOr<ModelSpec> model_spec(const std::string& name) {
  if (name == "cnn") return ModelSpec{name, 1, 28, 28, 10};
  if (name == "seed-cnn") return ModelSpec{name, 3, 32, 32, 10};
  if (name == "mlp") return ModelSpec{name, 1, 28, 28, 10};
  return Status::invalid_argument("unknown model '" + name +
                                  "' (expected one of: cnn, seed-cnn, mlp)");
}

std::shared_ptr<Module> make_model(const ModelSpec& spec) {
  if (spec.name == "mlp")
    return std::make_shared<Mlp>(spec.channels * spec.height * spec.width, 4096, spec.classes);
  return std::make_shared<Cnn>(spec.channels, spec.height, spec.width, spec.classes);
}

}  // namespace mixprec::nn
