// model_plan.h: a model file checked into a plan of layers (types, sizes, shapes, parameter
// counts) without building any module: what model_file.cpp builds from, what the fuzz
// harness and `mixprec summary` read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/nn/model_file.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

struct LayerPlan {
  std::string type, name, precision;  // "conv2d", "conv1" or "3", "auto" / "fp32"
  // What the type takes. embedding: in = positions, out = width; encoder: in = width,
  // out = feed-forward width, heads; decoder: in = width, heads; lm_head: in = width, out = 256.
  int64_t in = 0, out = 0, kernel = 0, stride = 0, padding = 0, heads = 0, output_padding = 0;
  int64_t dilation = 1, groups = 1;  // the convolutions' (PyTorch's meaning)
  bool bias = true;
  bool tied = true;  // lm_head: its weight is the embedding's token table
  bool mask_padding = false;  // embedding: byte 0 is padding that attention and pooling skip
  double eps = 1e-5, momentum = 0.1, p = 0.5;
  std::vector<int64_t> input_shape, output_shape;  // per sample
  int64_t parameters = 0;                          // trainable (batch norm's statistics not counted)
  std::vector<LayerPlan> body;                     // a residual block's layers
  std::vector<LayerPlan> shortcut;                 // and its projection shortcut (empty: identity)
};

// The checks of build_model_file (model_file.h), same errors, into a plan.
StatusOr<std::vector<LayerPlan>> plan_model_file(const std::string& text, const std::string& source,
                                                 int64_t channels, int64_t height, int64_t width, int64_t classes,
                                                 std::vector<ModelFileLayer>* layers, int64_t max_parameters,
                                                 bool token_input = false);

}  // namespace mixprec::nn
