// predict_command.cpp: `mixprec predict CHECKPOINT INPUT...`: the model's top-k classes for
// the user's own inputs: PNG/JPEG images, IDX image files, NumPy .npy arrays and CSV rows
// (issue 17). The
// model is rebuilt from the checkpoint as `eval` does, in the checkpoint's precision or
// --precision (autocast for amp-*, 16-bit weights for o2-*/pure-*), and every input is
// normalised with the mean/std the run recorded (or its dataset's, for older runs).
//
// Pixel values: images, IDX and integer .npy/CSV inputs are pixels 0..255 (as the datasets store
// them); float .npy inputs are values in [0, 1] (what torchvision's ToTensor gives). The
// shape must be the model's: [H, W] or [C, H, W] per sample, [N, ...] for several.
// A language model (gpt-tiny, gpt) takes text instead: --prompt TEXT or .txt files, and
// answers with its next byte's top-k.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/data/data.h"
#include "mixprec/data/image.h"
#include "mixprec/nn/models.h"
#include "mixprec/data/npy.h"
#include "mixprec/ops/ops.h"
#include "mixprec/amp/precision.h"
#include "suggest.h"
#include "mixprec/io/files.h"
#include "mixprec/train/weights.h"
#include "mixprec/train/train_config.h"
#include "mixprec/train/train_data.h"
#include "inference_messages.h"
#include "mixprec/infer/infer.h"
#include "predict_text.h"

namespace mixprec::cli {

namespace {

struct PredictFlags {
  int threads = 0;  // --threads (0: OpenMP's choice)
  std::string checkpoint_flag, precision, format = "table";
  std::vector<std::string> inputs;  // the first positional is the checkpoint unless --checkpoint
  std::vector<std::string> prompts;  // --prompt: text for a language model
  int64_t top_k = 3, batch_size = 64;
};

// One sample: where it came from and its values scaled to [0, 1], C*H*W of them.
struct Sample {
  std::string source;
  std::vector<float> unit;
};

struct InputError {
  std::string message;
  int code;
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Splits `values` (n samples of C*H*W, shape already checked) into samples.
void add_samples(const std::string& path, const std::vector<double>& values, int64_t per_sample, bool pixels,
                 bool single, std::vector<Sample>& out) {
  const int64_t n = int64_t(values.size()) / per_sample;
  for (int64_t i = 0; i < n; ++i) {
    Sample s{single ? path : path + "[" + std::to_string(i) + "]", {}};
    s.unit.resize(size_t(per_sample));
    for (int64_t j = 0; j < per_sample; ++j) {
      const double v = values[size_t(i * per_sample + j)];
      s.unit[size_t(j)] = float(pixels ? v / 255.0 : v);
    }
    out.push_back(std::move(s));
  }
}

// Values must be finite and within [0, 255] (pixels) or [0, 1] (unit floats).
std::optional<InputError> check_range(const std::string& path, const std::vector<double>& values, bool pixels) {
  const double hi = pixels ? 255.0 : 1.0;
  for (size_t i = 0; i < values.size(); ++i)
    if (!(values[i] >= 0.0 && values[i] <= hi))
      return InputError{path + ": element " + std::to_string(i) + " is " + std::to_string(values[i]) + ", expected " +
                            (pixels ? "a pixel value in 0..255" : "a value in [0, 1] (a float array is read as ToTensor output)"),
                        kExitData};
  return std::nullopt;
}

std::optional<InputError> load_npy(const std::string& path, const nn::ModelSpec& spec, std::vector<Sample>& out) {
  auto a = read_npy(path);
  if (!a.is_ok()) return InputError{a.status().message(), a.status().code() == StatusCode::invalid_argument ? kExitData : exit_code_for(a.status())};
  const int64_t c = spec.channels, h = spec.height, w = spec.width;
  const std::vector<int64_t>& s = a->shape;
  const bool pixels = a->descr[1] != 'f';
  // Accepted: [H, W] (one 1-channel sample), [C, H, W] (one), [N, H, W] (1 channel), [N, C, H, W].
  bool single = false;
  if (c == 1 && s.size() == 2 && s[0] == h && s[1] == w) single = true;
  else if (s.size() == 3 && s[0] == c && s[1] == h && s[2] == w) single = true;
  else if (c == 1 && s.size() == 3 && s[1] == h && s[2] == w) single = false;
  else if (s.size() == 4 && s[1] == c && s[2] == h && s[3] == w) single = false;
  else
    return InputError{path + ": shape " + shape_text(s) + " does not fit model " + spec.name + ": expected [" +
                          (c == 1 ? "" : std::to_string(c) + ", ") + std::to_string(h) + ", " + std::to_string(w) +
                          "] per sample, optionally with a leading batch dimension",
                      kExitData};
  if (auto e = check_range(path, a->values, pixels)) return e;
  add_samples(path, a->values, c * h * w, pixels, single, out);
  return std::nullopt;
}

std::optional<InputError> load_idx(const std::string& path, const nn::ModelSpec& spec, std::vector<Sample>& out) {
  auto idx = read_idx_images(path);
  if (!idx.is_ok()) return InputError{idx.status().message(), exit_code_for(idx.status())};
  if (spec.channels != 1 || idx->rows != spec.height || idx->cols != spec.width)
    return InputError{path + ": IDX images of " + std::to_string(idx->rows) + "x" + std::to_string(idx->cols) +
                          " do not fit model " + spec.name + " (" + std::to_string(spec.channels) + "x" +
                          std::to_string(spec.height) + "x" + std::to_string(spec.width) + ")",
                      kExitData};
  std::vector<double> v(idx->pixels.begin(), idx->pixels.end());
  add_samples(path, v, spec.height * spec.width, /*pixels=*/true, idx->count == 1, out);
  return std::nullopt;
}

// CSV: one sample per row, C*H*W pixel values 0..255; a first row that is not numeric is a
// header, and a first column named "label" (as in Kaggle's Fashion-MNIST CSV) is skipped.
std::optional<InputError> load_csv(const std::string& path, const nn::ModelSpec& spec, std::vector<Sample>& out) {
  // Through the regular-file check: a FIFO or device named as input is refused, never waited on.
  auto text = io::read_regular_file(path, "CSV input", uint64_t(1) << 31);
  if (!text.is_ok()) return InputError{text.status().message(), kExitData};
  std::istringstream in(std::move(text).value());
  const int64_t need = spec.channels * spec.height * spec.width;
  std::string line;
  int64_t row = 0, rows = 0;
  bool skip_first_column = false;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (row == 1 && !cells.empty() && !cells[0].empty() && !std::isdigit(static_cast<unsigned char>(cells[0][0])) &&
        cells[0][0] != '-' && cells[0][0] != '.') {
      skip_first_column = cells[0] == "label";
      continue;
    }
    const size_t first = skip_first_column ? 1 : 0;
    if (int64_t(cells.size() - first) != need)
      return InputError{path + ": row " + std::to_string(row) + " has " + std::to_string(cells.size() - first) +
                            " values, model " + spec.name + " needs " + std::to_string(need) +
                            (skip_first_column ? " (after the label column)" : ""),
                        kExitData};
    std::vector<double> v(static_cast<size_t>(need), 0.0);
    for (int64_t j = 0; j < need; ++j) {
      const std::string& cell = cells[first + size_t(j)];
      char* end = nullptr;
      const double x = std::strtod(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size() || !(x >= 0 && x <= 255))
        return InputError{path + ": row " + std::to_string(row) + ", column " + std::to_string(first + size_t(j) + 1) +
                              ": '" + cell + "', expected a pixel value in 0..255",
                          kExitData};
      v[size_t(j)] = x;
    }
    ++rows;
    Sample s{path + ":" + std::to_string(row), {}};
    s.unit.resize(size_t(need));
    for (int64_t j = 0; j < need; ++j) s.unit[size_t(j)] = float(v[size_t(j)] / 255.0);
    out.push_back(std::move(s));
  }
  if (rows == 0) return InputError{path + ": no data rows", kExitData};
  return std::nullopt;
}

// A text classifier (--dataset csv --text-column): one sample per text, each the byte ids the
// model reads (its first `width` bytes, 0-padded), as the training data was made.
void add_texts(const std::vector<std::pair<std::string, std::string>>& texts, int64_t width,
               std::vector<Sample>& out) {
  for (const auto& [source, text] : texts) {
    Sample s{source, std::vector<float>(size_t(width), 0.0f)};
    for (size_t j = 0; j < text.size() && j < size_t(width); ++j) s.unit[j] = float(uint8_t(text[j]));
    out.push_back(std::move(s));
  }
}

// A text classifier's CSV input: the column the run trained on, found by name.
std::optional<InputError> load_text_rows(const std::string& path, const train::TrainConfig& config, int64_t width,
                                         std::vector<Sample>& out) {
  auto t = read_csv_table(path, "", {}, config.text_column);
  if (!t.is_ok()) return InputError{t.status().message(), kExitData};
  std::vector<std::pair<std::string, std::string>> texts;
  for (int64_t r = 0; r < t->rows; ++r)
    texts.push_back({path + ":" + std::to_string(t->line_of_row[size_t(r)]), t->texts[size_t(r)]});
  add_texts(texts, width, out);
  return std::nullopt;
}

// A table run (--dataset csv): rows of the same CSV layout, the model's feature columns found
// by name in the header (a label column, if there, is ignored), raw numbers.
std::optional<InputError> load_table_rows(const std::string& path, const train::TrainConfig& config,
                                          std::vector<Sample>& out) {
  auto t = read_csv_table(path, "", config.feature_names);
  if (!t.is_ok()) return InputError{t.status().message(), kExitData};
  const size_t f = t->feature_names.size();
  for (int64_t r = 0; r < t->rows; ++r) {
    Sample s{path + ":" + std::to_string(t->line_of_row[size_t(r)]), {}};
    s.unit.assign(t->features.begin() + int64_t(f) * r, t->features.begin() + int64_t(f) * (r + 1));
    out.push_back(std::move(s));
  }
  return std::nullopt;
}

std::optional<InputError> load_image(const std::string& path, const nn::ModelSpec& spec, std::vector<Sample>& out) {
  auto img = decode_image_file(path);
  if (!img.is_ok()) return InputError{img.status().message(), kExitData};
  if (img->width != spec.width || img->height != spec.height)
    return InputError{path + ": image of " + std::to_string(img->width) + "x" + std::to_string(img->height) +
                          " pixels, model " + spec.name + " takes " + std::to_string(spec.width) + "x" +
                          std::to_string(spec.height) + " (resize it first; predict does not resample)",
                      kExitData};
  const std::vector<uint8_t> chw = to_chw(*img, spec.channels);
  add_samples(path, std::vector<double>(chw.begin(), chw.end()), spec.channels * spec.height * spec.width,
              /*pixels=*/true, /*single=*/true, out);
  return std::nullopt;
}

std::string extension(const std::string& path) {
  const auto dot = path.find_last_of('.');
  const auto slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string e = path.substr(dot + 1);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return e;
}

int run_predict(const PredictFlags& f, const std::string& checkpoint, const std::vector<std::string>& inputs) {
  auto predictor = infer::Predictor::open(checkpoint, f.precision);
  if (!predictor.is_ok()) return report_predictor_error(predictor.status());
  if (predictor->spec().language_model) return run_predict_text(*predictor, f.prompts, inputs, f.top_k, f.format);
  const nn::ModelSpec* spec = &predictor->spec();
  const train::TrainConfig& config = predictor->config();
  if (!f.prompts.empty() && !spec->token_input) {
    std::fprintf(stderr, "mixprec: usage error: predict: --prompt is for a language model or a text classifier; %s holds a %s (give it .png, .jpg, .npy, .csv or IDX inputs)\n",
                 predictor->loaded().opened.path.c_str(), predictor->spec().name.c_str());
    return kExitUsage;
  }

  std::vector<Sample> samples;
  if (spec->token_input) {  // --prompt texts first, then the CSV files' rows
    std::vector<std::pair<std::string, std::string>> prompts;
    for (size_t i = 0; i < f.prompts.size(); ++i) prompts.push_back({"prompt " + std::to_string(i + 1), f.prompts[i]});
    add_texts(prompts, spec->width, samples);
  }
  for (const std::string& path : inputs) {
    const std::string ext = extension(path);
    std::optional<InputError> err;
    if (spec->token_input && ext == "csv") err = load_text_rows(path, config, spec->width, samples);
    else if (spec->token_input)
      err = InputError{path + ": this model classifies texts (column '" + config.text_column +
                           "' of a CSV): give it .csv files with that column, or --prompt TEXT",
                       kExitUsage};
    else if (ext == "npy") err = load_npy(path, *spec, samples);
    else if (ext == "csv" && !config.feature_names.empty()) err = load_table_rows(path, config, samples);
    else if (!config.feature_names.empty())
      err = InputError{path + ": this model was trained on a table (--dataset csv): give it .csv rows with the "
                                  "columns " + train::field_text(*train::find_config_field("feature_names"), config),
                       kExitUsage};
    else if (ext == "csv") err = load_csv(path, *spec, samples);
    else if (ext == "idx" || ext == "idx3-ubyte" || ext == "gz" || path.find("ubyte") != std::string::npos)
      err = load_idx(path, *spec, samples);
    else if (ext == "png" || ext == "jpg" || ext == "jpeg" || looks_like_image(path))  // also by content
      err = load_image(path, *spec, samples);
    else
      err = InputError{path + ": unknown input kind '." + ext + "' (expected .png, .jpg, .npy, .csv or an IDX file: .idx, *-ubyte, *.gz)",
                       kExitUsage};
    if (err) {
      std::fprintf(stderr, "mixprec: %s: %s\n", err->code == kExitUsage ? "usage error" : "data error",
                   err->message.c_str());
      return err->code;
    }
  }

  const int64_t per_sample = spec->channels * spec->height * spec->width;
  nlohmann::json records = nlohmann::json::array();
  if (f.format == "table") std::printf("%-40s %s\n", "input", "top classes (probability)");
  if (f.format == "csv") std::printf("input,rank,class,name,probability\n");
  for (size_t first = 0; first < samples.size(); first += size_t(f.batch_size)) {
    const size_t n = std::min(samples.size() - first, size_t(f.batch_size));
    std::vector<float> x;
    x.reserve(n * size_t(per_sample));
    for (size_t i = 0; i < n; ++i) x.insert(x.end(), samples[first + i].unit.begin(), samples[first + i].unit.end());
    const std::vector<std::vector<float>> probs = predictor->probabilities(x, int64_t(n));
    for (size_t i = 0; i < n; ++i) {
      const std::string& src = samples[first + i].source;
      nlohmann::json top = nlohmann::json::array();
      std::string line;
      int64_t rank = 0;
      for (const infer::TopClass& t : predictor->top(probs[i], f.top_k)) {
        top.push_back({{"class", t.index}, {"name", t.name}, {"probability", t.probability}});
        char buf[128];
        std::snprintf(buf, sizeof buf, "%s%s (%.3f)", rank ? ", " : "", t.name.c_str(), t.probability);
        line += buf;
        ++rank;
        if (f.format == "csv")
          std::printf("%s,%lld,%lld,%s,%.6g\n", src.c_str(), (long long)rank, (long long)t.index, t.name.c_str(),
                      t.probability);
      }
      if (f.format == "table") std::printf("%-40s %s\n", src.c_str(), line.c_str());
      if (f.format == "json") records.push_back({{"input", src}, {"top", top}});
    }
  }
  if (f.format == "json") {
    nlohmann::json doc = {{"checkpoint", predictor->loaded().opened.path}, {"model", spec->name},
                          {"precision", predictor->loaded().preset.name}, {"predictions", records}};
    std::printf("%s\n", doc.dump(2).c_str());
  }
  return kExitOk;
}

}  // namespace

Runner add_predict_command(CLI::App& app) {
  auto flags = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand("predict", "Top-k classes of a checkpoint's model for your own inputs (.png, .jpg, .npy, .csv, IDX)");
  cmd->add_option("inputs", flags->inputs,
                  "CHECKPOINT (unless --checkpoint) then input files: .png, .jpg, .npy, .csv, IDX; .txt for a language model");
  cmd->add_option("--prompt", flags->prompts,
                  "Text for a language model (its next byte's top-k) or a text classifier (its classes); repeatable")
      ->allow_extra_args(false);  // one text per --prompt: what follows is an input file
  cmd->add_option("--checkpoint", flags->checkpoint_flag, "A .safetensors checkpoint, a run directory or a plain weights file");
  cmd->add_option("--precision", flags->precision, inference_precision_help())->check(inference_precision());
  cmd->add_option("--top-k", flags->top_k, "Classes shown per input")->check(integer_in(1, 1000))->capture_default_str();
  cmd->add_option("--batch-size", flags->batch_size, "Inputs per forward pass")
      ->check(integer_in(1, 1 << 16))->capture_default_str();
  cmd->add_flag_callback("--json", [flags] { flags->format = "json"; }, "Print JSON instead of a table");
  cmd->add_flag_callback("--csv", [flags] { flags->format = "csv"; }, "Print CSV (input,rank,class,name,probability)");
  add_threads_option(cmd, flags->threads);
  return [flags]() -> int {
    use_threads(flags->threads);
    std::vector<std::string> inputs = flags->inputs;
    std::string checkpoint = flags->checkpoint_flag;
    if (checkpoint.empty() && !inputs.empty()) {
      checkpoint = inputs.front();
      inputs.erase(inputs.begin());
    }
    if (checkpoint.empty()) {
      std::fprintf(stderr, "mixprec: usage error: predict: no checkpoint (mixprec predict CHECKPOINT INPUT...)\n");
      return kExitUsage;
    }
    if (inputs.empty() && flags->prompts.empty()) {
      std::fprintf(stderr, "mixprec: usage error: predict: no input files (mixprec predict CHECKPOINT INPUT..., or --prompt TEXT for a language model or text classifier)\n");
      return kExitUsage;
    }
    return run_predict(*flags, checkpoint, inputs);
  };
}

}  // namespace mixprec::cli
