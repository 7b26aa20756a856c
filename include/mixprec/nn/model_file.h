// model_file.h: a network described in a file, `mixprec train --model my_net.yaml` (YAML or
// JSON): a list of layers, blocks repeated, residual blocks, per-layer precision. The file
// format is in docs/models.md; models/*.yaml are examples (the built-in cnn, an MLP, a small
// ResNet) to copy and edit.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/nn/nn.h"
#include "mixprec/ops/op_category.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

// A --model value naming a model file: it ends in .yaml, .yml or .json.
bool is_model_file(const std::string& model);

// One layer as built: what `mixprec summary` prints.
struct ModelFileLayer {
  std::string name;       // its parameter prefix: "conv1", "3", "2.body.0"
  std::string type;       // "conv2d", "residual", ...
  std::vector<int64_t> output_shape;  // per sample: [C, H, W], [F], or [T, E] for a sequence
  int64_t parameters = 0;
  std::string precision;  // "auto" (the preset's autocast) or "fp32"
  int depth = 0;          // nesting (residual blocks)
  // What its layer type says about its dtypes: the policy-table row whose cast decides its
  // output (none: it keeps its input's dtype); whether its weights are a normalisation's
  // (kept f32 by the presets that keep norms f32); a block (residual) whose body's rows
  // follow one deeper and which outputs the wider of x and f(x); and the summary's "why" where
  // the row's policy alone would mislead ("{autocast}" stands for the autocast dtype).
  std::optional<amp::OpId> output_op;
  bool normalization = false;
  bool block = false;
  std::string autocast_why;
};

// True when the file's first layer is an embedding: a text classifier, whose input is byte
// ids (build it with token_input). False for anything else, malformed files included.
bool model_file_reads_text(const std::string& text);

// A language model's file ends in lm_head: it predicts the next byte at every position.
// Its context (the embedding's `context`, default kDefaultLanguageModelContext) is the window
// it reads; nullopt for a classifier (and for a file too malformed to tell).
inline constexpr int64_t kDefaultLanguageModelContext = 256;
std::optional<int64_t> model_file_context(const std::string& text);

// The text of a model file (a regular file of at most 1 MiB). A run records this text, so
// eval, predict and a resume rebuild the model without the file.
StatusOr<std::string> read_model_file(const std::string& path);

// The network `text` (YAML or JSON) describes, for inputs of channels x height x width (a
// table: its columns as channels of 1 x 1) and `classes` outputs; `source` names the file in
// messages, which point at file:line:column and suggest the closest name for an unknown layer
// type or parameter. Shape errors name the layer and both shapes. `layers` (optional) gets
// one row per layer. A layer that would take the model past `max_parameters` (counting
// batch norm's running statistics) is refused before it allocates anything.
inline constexpr int64_t kMaxModelFileParameters = int64_t(1) << 28;  // 1 GiB of f32
// With `token_input`, the input is `width` byte ids per sample (channels = height = 1).
StatusOr<std::shared_ptr<Module>> build_model_file(const std::string& text, const std::string& source,
                                                   int64_t channels, int64_t height, int64_t width, int64_t classes,
                                                   std::vector<ModelFileLayer>* layers = nullptr,
                                                   int64_t max_parameters = kMaxModelFileParameters,
                                                   bool token_input = false);

}  // namespace mixprec::nn
