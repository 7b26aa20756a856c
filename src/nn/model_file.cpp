// model_file.cpp: a model file's plan (model_plan.h) built from the nn layers, each by its
// layer type's entry (layer_type.h), into a Sequential, a language model or a text classifier.
#include "mixprec/nn/model_file.h"

#include "io/yaml_json.h"
#include "mixprec/io/files.h"
#include "mixprec/nn/models.h"
#include "mixprec/nn/nn_attention.h"
#include "nn/language_model_layers.h"
#include "nn/text_classifier.h"
#include "nn/layer_type.h"
#include "nn/model_plan.h"
#include "nn/model_planner.h"

namespace mixprec::nn {
namespace {

std::shared_ptr<Module> build_layer(const LayerPlan& p, BuildState& state);

}  // namespace

std::shared_ptr<Sequential> build_block(const std::vector<LayerPlan>& plans, BuildState& state) {
  auto seq = std::make_shared<Sequential>();
  for (const LayerPlan& p : plans) seq->add(p.name, build_layer(p, state));
  return seq;
}

namespace {

std::shared_ptr<Module> build_layer(const LayerPlan& p, BuildState& state) {
  const LayerType* t = find_layer_type(p.type);
  if (t == nullptr) throw Error(Status::internal("model file: a planned layer of unknown type '" + p.type + "'"));
  std::shared_ptr<Module> m = t->build(p, state);
  if (p.precision == "fp32") m->set_autocast(false);  // and its input cast to f32 (Module::operator())
  return m;
}

// The file's non-empty `layers` list; nullopt for a text too malformed to tell (the planner
// reports what is wrong, at its line).
std::optional<nlohmann::json> layers_of(const std::string& text) {
  auto doc = io::yaml_to_json(text, "model file", nullptr);
  if (!doc.is_ok() || !doc->is_object() || !doc->contains("layers")) return std::nullopt;
  nlohmann::json layers = std::move((*doc)["layers"]);
  if (!layers.is_array() || layers.empty()) return std::nullopt;
  return layers;
}

std::optional<int64_t> context_of(const nlohmann::json& layers) {
  if (!plan_detail::ends_language_model(layers.back())) return std::nullopt;
  const auto& first = layers[0];
  const std::string type = plan_detail::entry_type(first);
  if (first.is_object() && plan_detail::reads_ids(first) && first[type].is_object()) {
    const auto& context = first[type].value("context", nlohmann::json(kDefaultLanguageModelContext));
    // An out-of-range value is the planner's to report, at its line and column.
    if (context.is_number_integer() && context.get<int64_t>() >= 1 && context.get<int64_t>() <= 65536)
      return context.get<int64_t>();
  }
  return kDefaultLanguageModelContext;
}

bool reads_text(const nlohmann::json& layers) { return plan_detail::reads_ids(layers[0]); }

}  // namespace

std::optional<int64_t> model_file_context(const std::string& text) {
  const auto layers = layers_of(text);
  return layers ? context_of(*layers) : std::nullopt;
}

bool model_file_reads_text(const std::string& text) {
  const auto layers = layers_of(text);
  return layers && reads_text(*layers);
}

ModelSpec model_file_spec(const std::string& name, const std::string& text) {
  const auto layers = layers_of(text);  // parsed once for both questions
  if (auto context = layers ? context_of(*layers) : std::nullopt) {
    return ModelSpec{name, 1, 1, *context + 1, 256, /*language_model=*/true, text};  // reads bytes, as gpt
  }
  ModelSpec spec{name, 1, 28, 28, 10, false, text};
  if (layers && reads_text(*layers)) spec.height = 1, spec.width = 128, spec.token_input = true;
  return spec;
}

StatusOr<std::string> read_model_file(const std::string& path) {
  auto text = io::read_regular_file(path, "model file", uint64_t(1) << 20);
  if (!text.is_ok()) return text;
  // An empty text is what a run of a built-in model records (ModelSpec::file_text), so an
  // empty file used to train the built-in cnn under the file's name: refuse it here, where
  // every reader (train, bench, summary, models) gets its text.
  if (text->find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::invalid_argument("model file '" + path + "' is empty" + (text->empty() ? "" : " (only blank lines)") +
                                    ": expected a YAML or JSON model with a 'layers' list (docs/models.md; "
                                    "examples in models/)");
  return text;
}

StatusOr<std::shared_ptr<Module>> build_model_file(const std::string& text, const std::string& source,
                                                   int64_t channels, int64_t height, int64_t width, int64_t classes,
                                                   std::vector<ModelFileLayer>* layers, int64_t max_parameters,
                                                   bool token_input) {
  auto plan = plan_model_file(text, source, channels, height, width, classes, layers, max_parameters, token_input);
  if (!plan.is_ok()) return plan.status();
  BuildState state;
  state.plan = &*plan;
  if (!plan->empty() && find_layer_type(plan->back().type)->ends_language_model) {  // a language model: also steps token by token
    auto lm = std::make_shared<FileLanguageModel>(plan->front().in);  // the embedding's positions
    for (const LayerPlan& p : *plan) lm->add(p.name, build_layer(p, state));
    return std::shared_ptr<Module>(lm);
  }
  if (!plan->empty() && plan->front().mask_padding) {
    auto classifier = std::make_shared<FileTextClassifier>();  // padding masked in attention and pooling
    for (const LayerPlan& p : *plan) classifier->add(p.name, build_layer(p, state));
    return std::shared_ptr<Module>(classifier);
  }
  return std::shared_ptr<Module>(build_block(*plan, state));
}

}  // namespace mixprec::nn
