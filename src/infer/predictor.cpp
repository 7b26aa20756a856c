// predictor.cpp: the Predictor of mixprec/infer/infer.h (a checkpoint's model answering with class
// probabilities) and the helpers that name its answers (top_indices, byte_name).
#include <algorithm>
#include <cstdio>

#include "mixprec/autograd/autograd.h"
#include "mixprec/infer/infer.h"
#include "mixprec/ops/ops.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/train_config.h"
#include "mixprec/train/train_data.h"

namespace mixprec::infer {

namespace {

// The run's own class names (an image folder's subfolders, a table's label names) first,
// else the names of the dataset it trained on.
std::vector<std::string> class_names_of(const train::TrainConfig& config) {
  if (!config.class_names.empty()) return config.class_names;
  if (config.dataset == "fashion-mnist")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  if (config.dataset == "cifar10")
    return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  if (config.dataset == "mnist") return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  return {};
}

}  // namespace

std::string inference_preset_name(const std::string& precision) {
  if (precision == "bf16") return "o2-bf16";
  if (precision == "fp16") return "o2-fp16";
  return precision;
}

StatusOr<Predictor> Predictor::open(const std::string& checkpoint, const std::string& precision) {
  auto loaded = load_model(checkpoint, inference_preset_name(precision));
  if (!loaded.is_ok()) return loaded.status();
  Predictor p;
  p.loaded_ = std::move(loaded).value();
  const nn::ModelSpec& spec = p.loaded_.spec;
  train::TrainConfig config = p.loaded_.config;
  // The normalisation the run trained with: recorded in its config, else its dataset's.
  p.mean_ = config.norm_mean;
  p.stddev_ = config.norm_std;
  if (spec.language_model) return p;  // bytes in, no normalisation (predict's text path)
  if (spec.token_input) {              // a text classifier: byte ids in, no normalisation
    p.class_names_ = class_names_of(p.loaded_.config);
    return p;
  }
  if (p.mean_.size() != size_t(spec.channels) || p.stddev_.size() != size_t(spec.channels)) {
    config.train_subset = 1;
    auto data = train::load_data(config, spec);
    if (!data.is_ok())
      return Status(data.status().code(), "the checkpoint records no normalisation and its dataset cannot be read: " +
                                              data.status().message());
    p.mean_ = data->test->mean;
    p.stddev_ = data->test->stddev;
  }
  p.class_names_ = class_names_of(p.loaded_.config);
  return p;
}

serve::InputLayout Predictor::layout() const {
  serve::InputLayout l;
  l.channels = spec().channels;
  l.height = spec().height;
  l.width = spec().width;
  l.feature_names = config().feature_names;
  l.text = spec().token_input;
  if (spec().language_model) {  // prompts of up to its context
    l.channels = l.height = 1;
    l.width = spec().width - 1;
    l.text = l.next_byte = true;
  }
  return l;
}

std::string byte_name(int64_t b) {
  if (b == '\n') return "'\\n'";
  if (b == '\t') return "'\\t'";
  if (b == '\'') return "'\\''";
  if (b >= 32 && b < 127) return std::string("'") + char(b) + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02llx", static_cast<long long>(b));
  return buf;
}

std::vector<float> next_byte_sample(const std::string& prompt, int64_t context) {
  const size_t n = std::min(prompt.size(), size_t(std::max<int64_t>(context, 0))), from = prompt.size() - n;
  std::vector<float> sample(size_t(std::max<int64_t>(context, 0)) + 1, 0.0f);
  sample[0] = float(n);  // exact: a context is far below 2^24
  for (size_t j = 0; j < n; ++j) sample[1 + j] = float(static_cast<unsigned char>(prompt[from + j]));
  return sample;
}

namespace {

// A language model's samples ([length, bytes...], Predictor::layout): one forward over the
// longest prompt's positions (shorter ones 0-padded after their end: the attention is causal,
// so the padding changes nothing before it) and each prompt's last position's softmax.
std::vector<std::vector<float>> next_byte_probabilities(const LoadedModel& loaded, const std::vector<float>& samples,
                                                        int64_t n, int64_t context) {
  const int64_t per = context + 1;
  int64_t longest = 1;
  for (int64_t i = 0; i < n; ++i) {
    // A length outside [1, context] would index before the prompt or past the sample.
    const float length = samples[size_t(i * per)];
    if (!(length >= 1 && length <= float(context))) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%g", double(length));
      throw Error(Status::invalid_argument("predict: prompt " + std::to_string(i) + " has length " + shown +
                                           "; expected 1.." + std::to_string(context) + " bytes (next_byte_sample)"));
    }
    longest = std::max(longest, int64_t(length));
  }
  std::vector<int64_t> ids(size_t(n * longest), 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < longest; ++j) ids[size_t(i * longest + j)] = int64_t(samples[size_t(i * per + 1 + j)]);
  Tensor logits;
  {
    NoGradGuard no_grad;
    logits = run_model(loaded, Tensor::from_vector_i64(ids, {n, longest}));  // [n, longest, 256], f32
  }
  const int64_t vocab = logits.size(2);
  const std::vector<float> all = logits.to_vector();
  std::vector<std::vector<float>> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t last = int64_t(samples[size_t(i * per)]) - 1;
    const Tensor row = Tensor::from_vector(
        std::vector<float>(all.begin() + (i * longest + last) * vocab, all.begin() + (i * longest + last + 1) * vocab),
        {vocab});
    rows[size_t(i)] = softmax(row, 0).to_vector();  // in f32 whatever the preset, as predict's
  }
  return rows;
}

}  // namespace

std::vector<std::vector<float>> Predictor::probabilities(const std::vector<float>& samples, int64_t n) const {
  const nn::ModelSpec& s = spec();
  const int64_t per_sample = layout().values_per_sample();
  if (n < 0 || samples.size() != size_t(n * per_sample))
    throw Error(Status::invalid_argument("predict: " + std::to_string(samples.size()) + " values for " +
                                         std::to_string(n) + " samples; expected " + std::to_string(per_sample) +
                                         " per sample"));
  if (s.language_model) return next_byte_probabilities(loaded_, samples, n, s.width - 1);
  // An image or table needs its normalisation per channel: refused rather than read out of
  // bounds.
  if (!s.token_input && (mean_.size() != size_t(s.channels) || stddev_.size() != size_t(s.channels)))
    throw Error(Status::invalid_argument("predict: model " + s.name + " does not take fixed-size samples of " +
                                         std::to_string(s.channels) + " normalised channels"));
  Tensor input;
  if (s.token_input) {  // a text classifier: each sample is `width` byte ids (as floats, exact)
    input = Tensor::from_vector_i64(std::vector<int64_t>(samples.begin(), samples.end()), {n, s.width});
  } else {
    const int64_t c = s.channels, hw = s.height * s.width;
    std::vector<float> x(samples.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < hw; ++p) {
          const size_t at = size_t((i * c + ch) * hw + p);
          x[at] = float((double(samples[at]) - mean_[size_t(ch)]) / stddev_[size_t(ch)]);
        }
    input = Tensor::from_vector(x, {n, c, s.height, s.width});
  }
  Tensor probs;
  {
    NoGradGuard no_grad;
    probs = softmax(run_model(loaded_, input), 1);  // in f32 whatever the preset, as autocast would
  }
  const std::vector<double> p = probs.to_vector_f64();
  std::vector<std::vector<float>> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    rows[size_t(i)].assign(p.begin() + i * s.classes, p.begin() + (i + 1) * s.classes);
  return rows;
}

std::vector<int64_t> top_indices(const std::vector<float>& row, int64_t k) {
  std::vector<int64_t> order(row.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = int64_t(j);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[size_t(a)] > row[size_t(b)]; });
  order.resize(size_t(std::clamp<int64_t>(k, 0, int64_t(order.size()))));
  return order;
}

std::vector<TopClass> Predictor::top(const std::vector<float>& row, int64_t k) const {
  std::vector<TopClass> out;
  for (const int64_t cls : top_indices(row, k))
    out.push_back({cls,
                   spec().language_model                  ? byte_name(cls)
                   : size_t(cls) < class_names_.size()   ? class_names_[size_t(cls)]
                                                         : std::to_string(cls),
                   double(row[size_t(cls)])});
  return out;
}

int64_t Predictor::parameter_count() const { return loaded_.model->num_parameters(); }

int64_t Predictor::weight_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& t : loaded_.model->parameters()) bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  return bytes;
}

}  // namespace mixprec::infer
