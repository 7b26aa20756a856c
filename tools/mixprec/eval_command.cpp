// eval_command.cpp: `mixprec eval --checkpoint C`: rebuilds the model a checkpoint names,
// loads its weights by name and measures test accuracy, loss and images/s on the run's
// dataset, under the checkpoint's precision preset or another one (--precision): autocast
// for amp-*, 16-bit weights for o2-*/pure-*. --save-predictions lets an outside tool (the
// PyTorch cross-check in tests/golden/check_checkpoint_torch.py) compare logits.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/train/train_config.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "mixprec/amp/precision.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/train/weights.h"
#include "mixprec/train/train_data.h"
#include "suggest.h"
#include "inference_messages.h"
#include "mixprec/infer/infer.h"

namespace mixprec::cli {

namespace {

struct EvalFlags {
  int threads = 0;  // --threads (0: OpenMP's choice)
  std::string checkpoint, checkpoint_flag, precision, data_dir, dataset;
  std::string save_predictions;  // first batch's input, logits and labels (cross-checks)
  int64_t batch_size = 0;  // 0: the run's batch size
};

int checkpoint_error(const std::string& msg) {
  std::fprintf(stderr, "mixprec: checkpoint error: %s\n", msg.c_str());
  return kExitCheckpoint;
}

// "mean 0.286 std 0.353" (one pair per channel).
std::string normalisation_text(const ImageDataset& d) {
  std::string s;
  char buf[64];
  for (size_t c = 0; c < d.mean.size() && c < d.stddev.size(); ++c) {
    std::snprintf(buf, sizeof buf, "%smean %.4g std %.4g", c ? ", " : "", d.mean[c], d.stddev[c]);
    s += buf;
  }
  return s.empty() ? "none" : s;
}

int run_eval(const EvalFlags& f, const std::string& given) {
  if (f.batch_size < 0) {
    std::fprintf(stderr, "mixprec: usage error: --batch-size: must be >= 1\n");
    return kExitUsage;
  }
  auto loaded = infer::load_model(given, f.precision);
  if (!loaded.is_ok()) {
    if (loaded.status().code() == StatusCode::bad_checkpoint) return checkpoint_error(loaded.status().message());
    std::fprintf(stderr, "mixprec: usage error: %s\n", loaded.status().message().c_str());
    return exit_code_for(loaded.status());
  }
  const std::string* path = &loaded->opened.path;
  const TrainingState& st = loaded->opened.state;
  const nn::ModelSpec* spec = &loaded->spec;
  const amp::Preset* preset = &loaded->preset;
  train::TrainConfig config = loaded->config;
  if (loaded->opened.weights_only)  // no run configuration: the model's usual dataset, in fp32
    std::printf("weights %s: a plain safetensors file, %s\n", path->c_str(), loaded->opened.model_note.c_str());

  if (!f.dataset.empty()) config.dataset = f.dataset;
  if (!f.data_dir.empty()) config.data_dir = f.data_dir;
  config.train_subset = 1;  // load_data reads both splits; eval needs only the test split
  // New labelled data (--data-dir given for a folder or CSV run) is scored whole; the run's own
  // data on its test split (or the part --val-split held out in training).
  const bool whole_set = !f.data_dir.empty() && (config.dataset == "folder" || config.dataset == "csv");
  StatusOr<std::shared_ptr<const ImageDataset>> test = Status::internal("not loaded");
  if (whole_set) {
    config.val_split = 0;
    test = train::load_labelled_set(config, *spec);
  } else if (auto data = train::load_data(config, *spec); data.is_ok()) {
    test = data->test;
  } else {
    test = data.status();
  }
  if (!test.is_ok()) {
    std::fprintf(stderr, "mixprec: data error: %s\n", test.status().message().c_str());
    return exit_code_for(test.status());
  }
  const ImageDataset& test_set = **test;
  const int64_t batch = f.batch_size > 0 ? f.batch_size : std::max<int64_t>(config.batch_size, 1);
  DataLoader loader(*test, {.batch_size = batch, .shuffle = false, .prefetch = 1});

  const auto t0 = std::chrono::steady_clock::now();
  int64_t correct = 0, samples = 0;
  double loss_sum = 0.0;
  while (auto b = loader.next()) {
    NoGradGuard ng;
    const Tensor logits = infer::run_model(*loaded, b->images);  // f32 whatever the preset
    if (!f.save_predictions.empty() && samples == 0) {
      Status s = save_safetensors(f.save_predictions,
                                  {{"images", b->images}, {"logits", logits}, {"labels", b->labels}},
                                  {{"checkpoint", *path}, {"precision", preset->name}});
      if (!s.is_ok()) {
        std::fprintf(stderr, "mixprec: error: --save-predictions: %s\n", s.message().c_str());
        return kExitRuntime;
      }
    }
    // A language model predicts the next byte at every position: each is one prediction.
    const int64_t classes = logits.size(logits.dim() - 1);
    const Tensor flat = reshape(logits, {logits.numel() / classes, classes});
    const Tensor labels = reshape(b->labels, {b->labels.numel()});
    loss_sum += cross_entropy(flat, labels, Reduction::sum).item();
    const Tensor pred = argmax(flat);
    const int64_t* p = pred.data_ptr<int64_t>();
    const int64_t* y = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < pred.numel(); ++i) correct += p[i] == y[i];
    samples += pred.numel();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!loaded->opened.weights_only)
    std::printf("checkpoint %s (model %s, step %lld)\n", path->c_str(), spec->name.c_str(), (long long)st.global_step);
  if (test_set.text) {  // bytes predicted, in bits per byte as training reports them
    std::printf("eval: %s test set, %lld bytes predicted, precision %s\n", test_set.name.c_str(),
                (long long)samples, preset->name.c_str());
    const double loss = samples ? loss_sum / double(samples) : 0.0;
    std::printf("next-byte accuracy %.2f%% | %.4f bits/byte (loss %.4f) | %.0f bytes/s\n",
                samples ? 100.0 * double(correct) / double(samples) : 0.0, loss / std::log(2.0), loss,
                secs > 0 ? double(samples) / secs : 0.0);
    return kExitOk;
  }
  if (whole_set)
    std::printf("eval: %s, all %lld labelled samples, precision %s\n", test_set.source.c_str(), (long long)samples,
                preset->name.c_str());
  else
    std::printf("eval: %s test set, %lld images, precision %s\n", test_set.name.c_str(), (long long)samples,
                preset->name.c_str());
  if (test_set.skipped.count > 0)
    std::printf("skipped %lld unreadable samples (--skip-bad): first: %s\n", (long long)test_set.skipped.count,
                test_set.skipped.first.c_str());
  std::printf("normalisation: %s (%s)\n", normalisation_text(test_set).c_str(),
              config.norm_mean.empty() ? "the dataset's" : "recorded by the run");
  std::printf("accuracy %.2f%% | loss %.4f | %.0f images/s\n", samples ? 100.0 * double(correct) / double(samples) : 0.0,
              samples ? loss_sum / double(samples) : 0.0, secs > 0 ? double(samples) / secs : 0.0);
  return kExitOk;
}

}  // namespace

Runner add_eval_command(CLI::App& app) {
  auto flags = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint on its run's test set");
  add_checkpoint_argument(cmd, flags->checkpoint, flags->checkpoint_flag,
                          "A .safetensors checkpoint, a run directory (its last checkpoint) or a plain "
                          "safetensors file of weights (e.g. from PyTorch)");
  cmd->add_option("--precision", flags->precision, "Precision preset (default: the checkpoint's): " + amp::preset_names())
      ->check(precision_name());
  cmd->add_option("--dataset", flags->dataset, "Dataset (default: the run's; for a weights-only file the model's usual one)")
      ->check(one_of({"fashion-mnist", "mnist", "cifar10", "synthetic"}));
  cmd->add_option("--data-dir", flags->data_dir,
                  "Dataset location (default: the run's). For a folder or CSV run, new labelled data scored whole: "
                  "DIR/<class>/ images (or DIR/test/ of a train/test layout), FILE.csv (or DIR/test.csv)");
  cmd->add_option("--batch-size", flags->batch_size, "Images per batch (default: the run's)")
      ->check(at_least(1));
  cmd->add_option("--save-predictions", flags->save_predictions,
                  "Write the first batch's images, logits and labels to this .safetensors file");
  add_threads_option(cmd, flags->threads);
  return [flags]() -> int {
    use_threads(flags->threads);
    auto which = chosen_checkpoint(flags->checkpoint, flags->checkpoint_flag);
    if (!which) return kExitUsage;
    return run_eval(*flags, *which);
  };
}

}  // namespace mixprec::cli
