// prediction.h: a checkpoint's model ready to answer "which class is this?": what `predict`
// and `serve` share. Samples come in as values scaled the way the datasets store them
// (pixels / 255, raw table features), are normalised with the run's recorded statistics, run
// through the model in the chosen precision and come out as class probabilities (softmax in
// f32, as autocast would).
#pragma once
#include <string>
#include <vector>

#include "mixprec/serve.h"
#include "mixprec/status.h"
#include "weights_file.h"

namespace mixprec::cli {

// Inference precision names: `fp32`, `bf16` and `fp16` mean the weights cast once to that
// dtype with normalisation layers kept in f32 (the o2-* presets; what deployment in half
// precision means). Every training preset name is accepted too (amp-bf16: f32 weights under
// autocast). Note: for `train`, `bf16` is Lightning's alias of amp-bf16; here it is not.
std::string inference_preset_name(const std::string& flag);
// "fp32, bf16 or fp16 (...), or a preset: ..." for --help (the flag's check: suggest.h).
std::string inference_precision_help();

struct TopClass {
  int64_t index = 0;
  std::string name;
  double probability = 0;
};

// Prints Predictor::open's error ("checkpoint error", "usage error" or "data error") and
// returns its exit code (4, 2 or 3).
int report_predictor_error(const Status& status);

// The indices of the k largest values of row, largest first (ties in index order).
std::vector<int64_t> top_indices(const std::vector<float>& row, int64_t k);

class Predictor {
 public:
  // Errors: load_model's (bad_checkpoint, invalid_argument for --precision), or the dataset's
  // when the checkpoint records no normalisation and its dataset cannot be read.
  static StatusOr<Predictor> open(const std::string& checkpoint, const std::string& precision_flag);

  const LoadedModel& loaded() const { return loaded_; }
  const train::TrainConfig& config() const { return loaded_.config; }
  const nn::ModelSpec& spec() const { return loaded_.spec; }
  serve::InputLayout layout() const;
  // The per-channel input normalisation the run trained with.
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& stddev() const { return stddev_; }
  // As the run named its classes; empty when it did not (classes are then numbers).
  const std::vector<std::string>& class_names() const { return class_names_; }

  // Class probabilities of n samples (values_per_sample floats each, back to back; a
  // language model's: its prompt as layout() encodes it, the next byte's probabilities). Not
  // thread-safe: one caller at a time (serve's batcher thread).
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

// A byte as a reader would name it: 'e', ' ', '\n', or 0xc3 for a byte that is not printable
// ASCII (part of a UTF-8 sequence): a language model's classes.
std::string byte_name(int64_t b);

}  // namespace mixprec::cli
