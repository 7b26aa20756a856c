// model_file.cpp: a model file's plan (model_plan.h) built from the nn layers.
#include "mixprec/model_file.h"

#include "io/yaml_json.h"
#include "mixprec/files.h"
#include "mixprec/models.h"
#include "mixprec/nn_attention.h"
#include "nn/language_model_layers.h"
#include "nn/text_classifier.h"
#include "nn/model_plan.h"
#include "nn/model_planner.h"

namespace mixprec::nn {
namespace {

// What the layers being built share: the decoder count (GPT-2's initialisation scales by it)
// and the token table a tied lm_head reads.
struct BuildState {
  int64_t decoders = 0;
  std::shared_ptr<Embedding> tokens;
};

std::shared_ptr<Sequential> build_block(const std::vector<LayerPlan>& plans, BuildState& state);

std::shared_ptr<Module> build_layer(const LayerPlan& p, BuildState& state) {
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
  else if (p.type == "embedding") {
    auto e = std::make_shared<TokenEmbedding>(256, p.in, p.out);
    state.tokens = e->tokens;
    m = e;
  } else if (p.type == "decoder") {
    auto block = std::make_shared<GptBlock>(p.in, p.heads);
    init_gpt2_block(*block, state.decoders);
    m = block;
  } else if (p.type == "lm_head") {
    m = p.tied ? std::make_shared<LmHead>(state.tokens) : std::make_shared<LmHead>(p.out, p.in);
  }
  else if (p.type == "encoder")
    m = std::make_shared<TransformerEncoderLayer>(p.in, p.heads, p.out, p.p, Activation::gelu, p.eps);
  else if (p.type == "residual")
    m = std::make_shared<Residual>(build_block(p.body, state),
                                   p.shortcut.empty() ? nullptr : build_block(p.shortcut, state));
  else throw Error(Status::internal("model file: a planned layer of unknown type '" + p.type + "'"));
  if (p.precision == "fp32") m->set_autocast(false);  // and its input cast to f32 (Module::operator())
  return m;
}

std::shared_ptr<Sequential> build_block(const std::vector<LayerPlan>& plans, BuildState& state) {
  auto seq = std::make_shared<Sequential>();
  for (const LayerPlan& p : plans) seq->add(p.name, build_layer(p, state));
  return seq;
}

int64_t count_decoders(const std::vector<LayerPlan>& plans) {
  int64_t n = 0;
  for (const LayerPlan& p : plans) n += (p.type == "decoder") + count_decoders(p.body) + count_decoders(p.shortcut);
  return n;
}

}  // namespace

namespace {

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
  if (plan_detail::entry_type(layers.back()) != "lm_head") return std::nullopt;
  const auto& first = layers[0];
  if (first.is_object() && first.contains("embedding") && first["embedding"].is_object()) {
    const auto& context = first["embedding"].value("context", nlohmann::json(kDefaultLanguageModelContext));
    // An out-of-range value is the planner's to report, at its line and column.
    if (context.is_number_integer() && context.get<int64_t>() >= 1 && context.get<int64_t>() <= 65536)
      return context.get<int64_t>();
  }
  return kDefaultLanguageModelContext;
}

bool reads_text(const nlohmann::json& layers) {
  const auto& first = layers[0];
  return (first.is_string() && first == "embedding") || (first.is_object() && first.contains("embedding"));
}

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
  state.decoders = count_decoders(*plan);
  if (!plan->empty() && plan->back().type == "lm_head") {  // a language model: also steps token by token
    auto lm = std::make_shared<FileLanguageModel>(plan->front().in);  // the embedding's positions
    for (const LayerPlan& p : *plan) lm->add(p.name, build_layer(p, state));
    return std::shared_ptr<Module>(lm);
  }
  if (!plan->empty() && plan->front().type == "embedding" && plan->front().mask_padding) {
    auto classifier = std::make_shared<FileTextClassifier>();  // padding masked in attention and pooling
    for (const LayerPlan& p : *plan) classifier->add(p.name, build_layer(p, state));
    return std::shared_ptr<Module>(classifier);
  }
  return std::shared_ptr<Module>(build_block(*plan, state));
}

}  // namespace mixprec::nn
