// layer_type.h: a model file's layer type as one definition. One LayerType entry gives the
// type's YAML name and parameters, its planning (the input it takes, the shape it gives, its
// parameter count, its errors at file:line:column), its module construction, its ONNX
// emission and its `mixprec summary` row; layer_types() lists every entry. The planner
// (model_plan.cpp), the builder (model_file.cpp), the ONNX exporter (export/onnx_layers.cpp)
// and the summary rows read the entries and know no type by name. Entries live one family per
// file (layer_types_image.cpp, layer_types_dense.cpp, layer_types_text.cpp); docs/design.md's
// "adding a layer type" is the worked example.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixprec/nn/model_file.h"
#include "mixprec/nn/nn.h"
#include "mixprec/ops/op_category.h"
#include "mixprec/core/status.h"
#include "nn/model_plan.h"
#include "nn/onnx_writer.h"

// The fuzz harnesses and fuzz_corpus_replay_test link the planner without nn's modules, ops and
// kernels (cmake/fuzz_sources.cmake: about a quarter of the library, so that CI's sanitized
// fuzz build stays short). There the entries' files are compiled with MIXPREC_LAYER_PLAN_ONLY,
// and an entry's build and ONNX parts, written inside MIXPREC_MODULE_PART(...), become null:
// one entry still holds all of a type, and the planner links alone.
#ifdef MIXPREC_LAYER_PLAN_ONLY
#define MIXPREC_MODULE_PART(...) nullptr
#else
#define MIXPREC_MODULE_PART(...) __VA_ARGS__
#endif

// The planners' way to take a StatusOr's value or return its error (every family file uses it).
#define MIXPREC_TAKE(var, expr)                    \
  auto var##_or = (expr);                          \
  if (!var##_or.is_ok()) return var##_or.status(); \
  const auto var = *var##_or

namespace mixprec::nn {

class MultiheadAttention;

namespace plan_detail {
class Planner;
}

// ---- Building: what the layers being built share.
struct BuildState {
  const std::vector<LayerPlan>* plan = nullptr;  // the whole file's plan
  std::shared_ptr<Embedding> tokens;             // the embedding's token table (a tied lm_head reads it)
};
// A list of planned layers as a Sequential (a residual block's body and shortcut).
std::shared_ptr<Sequential> build_block(const std::vector<LayerPlan>& plans, BuildState& state);

// ---- The entry.
struct LayerParam {
  const char* name;
  enum Kind { integer, number, boolean } kind;
};

// What a layer's plan function sees: its parameters by name (checked against the entry's
// list), the raw value (a residual's lists), where they are in the file, and the layer.
struct LayerArgs {
  const std::map<std::string, nlohmann::json>& p;
  const nlohmann::json& raw;
  const std::string& at;        // the parameters' JSON pointer (errors point here)
  const std::string& entry_at;  // the layer entry's
  const std::string& full;      // its parameter prefix ("2.body.0")
  int nesting;
};

struct LayerType {
  const char* name;
  std::vector<LayerParam> params;
  // The shape it takes and gives (`shape` becomes its output), its parameters into `m`.
  Status (*plan)(plan_detail::Planner& planner, const LayerArgs& args, std::vector<int64_t>& shape, LayerPlan& m);
  std::shared_ptr<Module> (*build)(const LayerPlan& p, BuildState& state);
  // The modules it builds, and each as ONNX nodes computing what its forward() computes in
  // eval mode. `emits` may look at the input's rank (one module class, two types).
  bool (*emits)(const Module& m, const OnnxValue& x);
  StatusOr<OnnxValue> (*emit_onnx)(const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x);
  // Its `mixprec summary` row (ModelFileLayer): the policy row deciding its output dtype
  // (none: it keeps its input's), whether its weights are a normalisation's (f32 under the
  // presets that keep norms f32), and the "why" under autocast when the row's policy alone
  // would mislead ({autocast}: the autocast dtype).
  std::optional<amp::OpId> output_op;
  bool normalization = false;
  const char* autocast_why = nullptr;
  // Input and place in a language model: `reads_ids` takes byte ids (the first layer of a
  // text model); `ends_language_model`: a file ending in it is one (lm_head); `per_position`
  // keeps each position to itself and the ones before it (a language model's layers, listed
  // with their `per_position_note`); `language_model_hint` is added when it is refused there.
  bool reads_ids = false;
  bool ends_language_model = false;
  bool per_position = false;
  const char* per_position_note = nullptr;
  const char* language_model_hint = nullptr;
  // Its body's rows follow one deeper (a residual block): the summary walks them.
  bool block = false;
  // The elements per sample it holds from forward until backward (null: its output's, which
  // the next layer keeps): train's memory estimate before anything is allocated.
  double (*kept_activations)(const LayerPlan& p) = nullptr;
  // A small model file that uses it, for the tests every type gets (layer_types_test: it
  // plans, builds, runs and its modules are its own; onnx_export_test: its ONNX graph gives
  // mixprec's logits). Input: 2x6x6 images and 3 classes, or 8 byte ids when its first layer
  // reads ids (a language model of context 8 when it ends in lm_head).
  const char* example = nullptr;
};

// Every layer type, in the order error messages list them.
const std::vector<const LayerType*>& layer_types();
const LayerType* find_layer_type(const std::string& name);
// The entry whose module `m` is (nullptr: not a layer type's).
const LayerType* layer_type_of(const Module& m, const OnnxValue& x);

// Each family's entries (layer_types.cpp concatenates them).
std::vector<const LayerType*> image_layer_types();
std::vector<const LayerType*> dense_layer_types();
std::vector<const LayerType*> text_layer_types();

// The ONNX emission of the modules the built-in models share with layer types (export's
// Cnn, ResNet, Gpt emitters call these: one definition each).
OnnxValue onnx_linear(const Linear& m, OnnxWriter& w, const std::string& path, const OnnxValue& x);
OnnxValue onnx_conv2d(const Conv2d& m, OnnxWriter& w, const std::string& path, const OnnxValue& x);
OnnxValue onnx_max_pool(OnnxWriter& w, const OnnxValue& x, int64_t kernel, int64_t stride, int64_t padding,
                        const std::string& path);
OnnxValue onnx_batch_norm(const BatchNorm2d& m, OnnxWriter& w, const std::string& path, const OnnxValue& x);
OnnxValue onnx_layer_norm(const LayerNorm& m, OnnxWriter& w, const std::string& path, const OnnxValue& x);
OnnxValue onnx_relu(OnnxWriter& w, const OnnxValue& x, const std::string& path);
OnnxValue onnx_gelu(OnnxWriter& w, const OnnxValue& x, const std::string& path);
OnnxValue onnx_add(OnnxWriter& w, const OnnxValue& a, const OnnxValue& b, const std::string& path);
OnnxValue onnx_flatten(OnnxWriter& w, const OnnxValue& x, const std::string& path);
OnnxValue onnx_attention(const MultiheadAttention& m, OnnxWriter& w, const std::string& path, const OnnxValue& x);

}  // namespace mixprec::nn
