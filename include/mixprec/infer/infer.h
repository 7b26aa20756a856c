// mixprec/infer/infer.h: a trained model put to use, without the command line: opening a checkpoint
// (or a run directory, or a plain safetensors file of weights as PyTorch writes it) as a model
// ready to run, class probabilities for the user's samples with the run's own normalisation
// (the Predictor), and text from a byte-level language model. `mixprec predict`, `serve`,
// `generate`, `eval`, `infer`, `inspect` and `export` call exactly this code, and so can an
// embedding application or a binding (docs/api.md, "Inference"; examples/predict.cpp).
//
// Errors are Status values naming the file, the metadata key and the expected value; what a
// command prints for them and which exit code it returns is the CLI's business.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/io/checkpoint.h"
#include "mixprec/core/dtype.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/serve/serve.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"
#include "mixprec/train/train.h"

namespace mixprec::infer {

// ---- opening weights --------------------------------------------------------------------

// What `inspect`, `eval`, `infer` and `predict` open: a mixprec checkpoint (or a run
// directory), or a plain safetensors file of weights
// (safetensors.torch.save_file(model.state_dict(), path): tensors only, no mixprec metadata).
// For the plain file the model is found by its tensor names and shapes.
struct OpenedWeights {
  std::string path;      // the file read (a run directory resolves to its last checkpoint)
  TrainingState state;   // for a plain file: model tensors and model_name only
  bool weights_only = false;
  // Plain file: "matches model cnn (8 tensors)" or why it matches none ("closest is cnn:
  // missing 'fc2.bias'; 'fc1.weight' has shape [128, 3136], cnn has [256, 3136]").
  std::string model_note;
};

// Errors: the checkpoint's own (not_found, data_loss ...) when the file is neither a mixprec
// checkpoint nor a plain safetensors file.
StatusOr<OpenedWeights> open_weights(const std::string& path_or_run_dir);

// A checkpoint opened as a model ready to run.
struct LoadedModel {
  OpenedWeights opened;
  // The run's configuration; for a plain weights file the defaults, with the model's usual
  // dataset (its normalisation and class names).
  train::TrainConfig config;
  nn::ModelSpec spec;
  amp::Preset preset;                 // `precision`, else the checkpoint's, else fp32
  std::shared_ptr<nn::Module> model;  // eval mode, weights in the preset's parameter dtype
};

// `precision` is a preset name (amp::preset_by_name), or "" for the checkpoint's own.
// Errors: bad_checkpoint naming the file and the metadata key (unreadable file, unknown
// model, a plain file that matches no model, an unknown precision in the file, weights that
// do not fit); invalid_argument naming --precision when `precision` is unknown.
StatusOr<LoadedModel> load_model(const std::string& path_or_run_dir, const std::string& precision);

// The model's logits for input (f32, NCHW, normalised; or token ids) under its preset: inputs
// cast to the parameter dtype, autocast as the preset says; returned in f32. No autograd.
Tensor run_model(const LoadedModel& loaded, const Tensor& input);

// ---- class probabilities ----------------------------------------------------------------

// Inference precision names: `fp32`, `bf16` and `fp16` mean the weights cast once to that
// dtype with normalisation layers kept in f32 (the o2-* presets; what deployment in half
// precision means). Every training preset name passes through unchanged (amp-bf16: f32
// weights under autocast). Note: for `train`, `bf16` is Lightning's alias of amp-bf16; here it
// is not.
std::string inference_preset_name(const std::string& precision);

struct TopClass {
  int64_t index = 0;
  std::string name;
  double probability = 0;
};

// The indices of the k largest values of row, largest first (ties in index order); k is
// clamped to [0, row.size()].
std::vector<int64_t> top_indices(const std::vector<float>& row, int64_t k);

// A byte as a reader would name it: 'e', ' ', '\n', or 0xc3 for a byte that is not printable
// ASCII (part of a UTF-8 sequence): a language model's classes.
std::string byte_name(int64_t b);

// A checkpoint's model ready to answer "which class is this?". Samples come in as values
// scaled the way the datasets store them (pixels / 255, raw table features), are normalised
// with the run's recorded statistics, run through the model in the chosen precision and come
// out as class probabilities (softmax in f32, as autocast would).
class Predictor {
 public:
  // `precision`: an inference precision name (inference_preset_name) or "" for the
  // checkpoint's. Errors: load_model's (bad_checkpoint, invalid_argument for the precision),
  // or the dataset's when the checkpoint records no normalisation and its dataset cannot be
  // read.
  static StatusOr<Predictor> open(const std::string& checkpoint, const std::string& precision);

  const LoadedModel& loaded() const { return loaded_; }
  const train::TrainConfig& config() const { return loaded_.config; }
  const nn::ModelSpec& spec() const { return loaded_.spec; }
  serve::InputLayout layout() const;
  // The per-channel input normalisation the run trained with.
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& stddev() const { return stddev_; }
  // As the run named its classes; empty when it did not (classes are then numbers).
  const std::vector<std::string>& class_names() const { return class_names_; }

  // Class probabilities of n samples (layout().values_per_sample() floats each, back to back;
  // a language model's: its prompt as next_byte_sample encodes it, the next byte's
  // probabilities). Not thread-safe: one caller at a time (serve's batcher thread). Throws
  // Error (invalid_argument) for an image or table model without a normalisation per channel.
  std::vector<std::vector<float>> probabilities(const std::vector<float>& samples, int64_t n) const;

  // The k most probable classes of one row of probabilities, named as the run named them (a
  // language model's: byte_name).
  std::vector<TopClass> top(const std::vector<float>& probabilities, int64_t k) const;

  int64_t parameter_count() const;
  int64_t weight_bytes() const;  // parameters in their dtypes (16-bit presets: about half)

 private:
  LoadedModel loaded_;
  std::vector<double> mean_, stddev_;
  std::vector<std::string> class_names_;
};

// A language model's sample for Predictor::probabilities: [n, the prompt's last n <= context
// bytes, 0-padded to context] (serve::InputLayout::next_byte). An empty prompt gives n = 0,
// which probabilities refuses: a prompt needs at least one byte.
std::vector<float> next_byte_sample(const std::string& prompt, int64_t context);

// ---- text generation --------------------------------------------------------------------

struct GenerationSettings {
  int64_t max_tokens = 200;  // bytes to generate
  double temperature = 0.8;  // 0: always the most likely byte
  int64_t top_k = 40;        // sample among the k most likely bytes (0: all 256)
  uint64_t seed = 0;
};

// Text from a byte-level language model, one byte at a time with its key/value cache
// (nn::StepwiseLanguageModel::forward_step), sampled with a temperature and top-k from a
// seeded generator: the same prompt, settings and seed give the same bytes. Returns the bytes
// that follow `prompt` (an empty prompt starts from a new line). Runs under `autocast` when
// given (the preset's autocast_dtype); a full context slides (the cache restarts from the
// last half of the text). on_byte, when given, sees each byte as it is made (streaming) and
// returns false to stop early (its output closed, its client gone): the bytes made so far are
// returned.
std::string generate_text(nn::StepwiseLanguageModel& lm, std::optional<DType> autocast, const std::string& prompt,
                          const GenerationSettings& settings, const std::function<bool(char)>& on_byte = {});

}  // namespace mixprec::infer
