// weights_file.cpp: opening weights and loading a checkpoint's model (mixprec/infer/infer.h): a
// mixprec checkpoint, a run directory, or a plain safetensors file recognised by its tensor
// names and shapes.
#include <map>
#include <optional>

#include "mixprec/infer/infer.h"

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/models.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/train/train_config.h"
#include "mixprec/train/train_data.h"
#include "mixprec/train/weights.h"

namespace mixprec::infer {

namespace {

// How far the tensors are from a model: names it lacks, names it does not have, shapes that
// differ. Empty: they are exactly its state_dict.
std::string mismatch(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& model_name,
                     int& distance) {
  auto spec = nn::model_spec(model_name);
  if (!spec.is_ok()) {
    distance = 1 << 30;
    return spec.status().message();
  }
  auto model = nn::make_model(*spec);
  auto expected = model->named_parameters();
  for (auto& b : model->named_buffers()) expected.push_back(b);
  std::map<std::string, Tensor> have(tensors.begin(), tensors.end());
  std::string missing, shapes, unexpected;
  distance = 0;
  std::map<std::string, bool> known;
  for (const auto& [name, t] : expected) {
    known[name] = true;
    auto it = have.find(name);
    if (it == have.end()) {
      missing += (missing.empty() ? "" : ", ") + ("'" + name + "'");
      ++distance;
    } else if (it->second.shape() != t.shape()) {
      shapes += (shapes.empty() ? "" : ", ") + ("'" + name + "' has shape " + shape_str(it->second.shape()) + ", " +
                                                model_name + " has " + shape_str(t.shape()));
      ++distance;
    }
  }
  for (const auto& [name, t] : tensors)
    if (!known.count(name)) {
      unexpected += (unexpected.empty() ? "" : ", ") + ("'" + name + "'");
      ++distance;
    }
  std::string why;
  if (!missing.empty()) why += "missing " + missing;
  if (!unexpected.empty()) why += (why.empty() ? "" : "; ") + ("unexpected " + unexpected);
  if (!shapes.empty()) why += (why.empty() ? "" : "; ") + shapes;
  return why;
}

}  // namespace

StatusOr<OpenedWeights> open_weights(const std::string& given) {
  auto path = resolve_checkpoint(given);
  if (!path.is_ok()) return path.status();
  OpenedWeights out;
  out.path = *path;
  auto state = load_checkpoint(*path);
  if (state.is_ok()) {
    out.state = std::move(state).value();
    return out;
  }
  // Not a mixprec checkpoint: a plain safetensors file without our metadata is weights.
  auto file = load_safetensors(*path);
  if (!file.is_ok() || file->metadata.count("format")) return state.status();
  out.weights_only = true;
  out.state.model = file->tensors;
  out.state.checksums = file->checksums;
  int best = 1 << 30;
  std::string best_name, best_why;
  for (const std::string& name : nn::model_names()) {
    int d = 0;
    std::string why = mismatch(file->tensors, name, d);
    if (d < best) best = d, best_name = name, best_why = why;
  }
  if (best == 0) {
    out.state.model_name = best_name;
    out.model_note = "matches model " + best_name + " (" + std::to_string(file->tensors.size()) + " tensors)";
  } else {
    std::string names;
    for (const std::string& n : nn::model_names()) names += (names.empty() ? "" : ", ") + n;
    out.model_note = "matches no mixprec model (" + names + "); closest is " + best_name + ": " +
                     best_why;
  }
  return out;
}

StatusOr<LoadedModel> load_model(const std::string& given, const std::string& precision_flag) {
  auto bad = [](const std::string& msg) { return Status(StatusCode::bad_checkpoint, msg); };
  auto opened = open_weights(given);
  if (!opened.is_ok()) return bad(opened.status().message());
  LoadedModel m;
  m.opened = std::move(opened).value();
  const std::string& path = m.opened.path;
  const TrainingState& st = m.opened.state;
  if (m.opened.weights_only && st.model_name.empty())
    return bad(path + ": a plain safetensors file that " + m.opened.model_note);
  // A file without a usable configuration falls back to the defaults.
  auto parsed = train::config_from_json(st.config_json);
  m.config = parsed.is_ok() ? parsed.value() : train::TrainConfig{};
  if (!st.model_name.empty()) m.config.model = st.model_name;
  auto spec = train::model_spec_of(m.config);  // with the input and classes the run recorded
  if (!spec.is_ok()) return bad("checkpoint '" + path + "': metadata key 'model_name': " + spec.status().message());
  m.spec = *spec;
  m.config.model = m.spec.name;
  if (m.opened.weights_only) {  // no run configuration: the model's usual dataset
    if (m.spec.name == "transformer") m.config.dataset = "synthetic";
    if (m.spec.channels == 3) m.config.dataset = "cifar10";
  }
  const std::string precision =
      !precision_flag.empty() ? precision_flag : st.precision.empty() ? "fp32" : st.precision;
  auto preset = amp::preset_by_name(precision);
  if (!preset.is_ok() && precision_flag.empty())  // the file's value is at fault, not a flag
    return bad("checkpoint '" + path + "': metadata key 'precision': " + preset.status().message() +
               " (pass --precision)");
  if (!preset.is_ok()) return Status::invalid_argument("--precision: " + preset.status().message());
  m.preset = *preset;
  auto built = nn::build_model(m.spec);
  if (!built.is_ok()) return bad("checkpoint '" + path + "': its recorded model file: " + built.status().message());
  m.model = std::move(built).value();
  if (Status s = train::load_weights(*m.model, st.model, path); !s.is_ok()) return bad(s.message());
  if (m.preset.param_dtype != DType::f32) m.model->to(m.preset.param_dtype, m.preset.keep_norm_fp32);
  m.model->eval();
  return m;
}

Tensor run_model(const LoadedModel& loaded, const Tensor& input) {
  NoGradGuard no_grad;
  Tensor logits;
  {
    std::optional<amp::AutocastGuard> autocast;
    if (loaded.preset.autocast_dtype) autocast.emplace(*loaded.preset.autocast_dtype);
    // Token ids (language models, text classifiers) are indices: never converted.
    logits = (*loaded.model)(is_floating(input.dtype()) ? input.to(loaded.preset.param_dtype) : input);
  }
  return logits.to(DType::f32);  // losses, argmax and softmax in f32 whatever the preset
}

}  // namespace mixprec::infer
