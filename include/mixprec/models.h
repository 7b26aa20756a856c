// models.h: the models the CLI and benchmarks train, built from nn layers.
#pragma once
#include <memory>
#include <string>

#include "mixprec/nn.h"
#include "mixprec/status.h"

namespace mixprec::nn {

// The CNN of the seed articles: conv(C->32, 3x3, pad 1) -> ReLU -> max-pool 2 ->
// conv(32->64, 3x3, pad 1) -> ReLU -> max-pool 2 -> flatten -> fc1(64*H/4*W/4 -> 256) ->
// ReLU -> fc2(256 -> classes). Parameters: conv1.*, conv2.*, fc1.*, fc2.*.
class Cnn : public Module {
 public:
  Cnn(int64_t in_channels, int64_t height, int64_t width, int64_t classes = 10);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Cnn"; }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Linear> fc1, fc2;
};

// Multi-layer perceptron on flattened input: fc1 -> ReLU -> fc2 -> ReLU -> fc3.
class Mlp : public Module {
 public:
  Mlp(int64_t in_features, int64_t hidden, int64_t classes = 10);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Mlp"; }
  std::shared_ptr<Linear> fc1, fc2, fc3;
};

struct ModelSpec {
  std::string name;  // "cnn" (1x28x28), "seed-cnn" (3x32x32), "mlp" (784-4096-4096-10)
  int64_t channels, height, width, classes;
};

// The names `mixprec train --model` accepts, with their input geometry.
StatusOr<ModelSpec> model_spec(const std::string& name);
std::shared_ptr<Module> make_model(const ModelSpec& spec);

}  // namespace mixprec::nn
