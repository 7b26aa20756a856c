// train_config.cpp: the table of TrainConfig's settings (train_config.h) and the checks of
// one field against its row. Reading and writing settings as text (config.json, --config
// files, the resume merge) is in config_text.cpp; validate() (which also asks the presets and
// models) in validate.cpp, so parsers of config text need neither.
#include "mixprec/train/train_config.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"
#include "mixprec/core/names.h"

namespace mixprec::train {

// 16M examples in one step: far beyond any memory this runs in; larger values are typos or
// overflowed arithmetic in a script.
constexpr double kMaxBatchSize = double(int64_t(1) << 24);

const std::vector<ConfigField>& config_fields() {
  using C = TrainConfig;
  // Designated initialisers name what each number is; rows appear in --help in this order.
  static const std::vector<ConfigField> fields = {
      {.key = "model", .flag = "--model", .member = &C::model,
       .help = "Model: cnn (1x28x28), seed-cnn (3x32x32), mlp, transformer (128 tokens x 256), "
               "resnet20 (1x28x28), resnet20-cifar (3x32x32), gpt-tiny, gpt; or a model file FILE.yaml|.json "
               "(docs/models.md; models/ has examples)",
       .choices = nn::model_names(), .fixed_on_resume = true},
      {.key = "dataset", .flag = "--dataset", .member = &C::dataset,
       .help = "Dataset: fashion-mnist, mnist, cifar10, synthetic, folder (your images: --data-dir DIR with "
               "one subfolder per class), csv (your table: --data-dir FILE.csv or a folder of train.csv and "
               "test.csv; --model mlp), npy (--data-dir DIR of x_train.npy, y_train.npy [, x_test.npy, "
               "y_test.npy]); for a language model kjv (the King James Bible, scripts/prepare-kjv) "
               "or text (--data-dir FILE)",
       .choices = {"fashion-mnist", "mnist", "cifar10", "synthetic", "folder", "csv", "npy", "kjv", "text"},
       .fixed_on_resume = true},
      {.key = "data_dir", .flag = "--data-dir", .member = &C::data_dir,
       .help = "Dataset folder (default: /usr/share/datasets/<dataset> where Debian installs it; data/kjv for "
               "kjv); for --dataset folder DIR/<class>/*.png|jpg (or DIR/train/ and DIR/test/); for --dataset "
               "text the text file"},
      // Its values (presets, aliases, params=..,compute=..) are checked by amp::preset_by_name.
      {.key = "precision", .flag = "--precision", .member = &C::precision, .help = "Precision preset",
       .fixed_on_resume = true},
      {.key = "epochs", .flag = "--epochs", .member = &C::epochs, .help = "Passes over the training set", .min = 1},
      // -1 or >= 1: the 0 in between is refused by validate().
      {.key = "max_steps", .flag = "--max-steps", .member = &C::max_steps,
       .help = "Stop after this many steps (-1: no limit)", .min = -1},
      {.key = "batch_size", .flag = "--batch-size", .member = &C::batch_size, .help = "Images per step", .min = 1,
       .max = kMaxBatchSize, .fixed_on_resume = true},
      {.key = "lr", .flag = "--lr", .member = &C::lr, .help = "Learning rate", .min = 0, .min_open = true},
      {.key = "lr_schedule", .flag = "--lr-schedule", .member = &C::lr_schedule,
       .help = "Learning-rate schedule: constant, cosine, linear (decay to --min-lr at the last step)",
       .choices = {"constant", "cosine", "linear"}},
      {.key = "warmup_steps", .flag = "--warmup-steps", .member = &C::warmup_steps,
       .help = "Steps of linear learning-rate warm-up from lr / N to lr", .min = 0},
      {.key = "min_lr", .flag = "--min-lr", .member = &C::min_lr,
       .help = "Learning rate at the last step of a cosine or linear schedule", .min = 0},
      {.key = "optimizer", .flag = "--optimizer", .member = &C::optimizer, .help = "Optimizer: adam, adamw, sgd",
       .choices = {"adam", "adamw", "sgd"}, .fixed_on_resume = true},
      // PyTorch's SGD refuses a negative momentum ("Invalid momentum value").
      {.key = "momentum", .flag = "--momentum", .member = &C::momentum, .help = "SGD momentum", .min = 0},
      {.key = "weight_decay", .flag = "--weight-decay", .member = &C::weight_decay, .help = "Weight decay", .min = 0},
      {.key = "seed", .flag = "--seed", .member = &C::seed, .help = "Seed for initialisation and shuffling",
       .fixed_on_resume = true},
      // The upper bound that depends on the machine (4x its hardware threads) is validate()'s.
      {.key = "threads", .flag = "--threads", .member = &C::threads,
       .help = "Threads (0: OMP_NUM_THREADS if set, else the cores other processes leave free, within the cgroup "
               "CPU quota, kept for the run; at most 4x the hardware threads)", .min = 0, .max = double(1 << 20)},
      // The upper bound that depends on the machine is validate()'s, as for --threads.
      {.key = "workers", .flag = "--workers", .member = &C::workers,
       .help = "Train as N workers, threads of this process that are the ranks of a data-parallel run (each "
               "on 1/N of every batch with --threads threads, 1 when 0; mpirun -np N's arithmetic): they meet a "
               "few times per step, so they keep their share of cores other processes keep busy (0: one per core "
               "when other processes keep cores busy at the start and neither --threads nor OMP_NUM_THREADS is "
               "set, else 1; recorded for the run)",
       .min = 0, .max = double(1 << 20), .fixed_on_resume = true},
      {.key = "train_subset", .flag = "--train-subset", .member = &C::train_subset,
       .help = "Use only the first N training images (-1: all)", .min = -1, .fixed_on_resume = true},
      {.key = "test_subset", .flag = "--test-subset", .member = &C::test_subset,
       .help = "Evaluate on only the first N test images (-1: all)", .min = -1},
      {.key = "shuffle", .flag = "--no-shuffle", .member = &C::shuffle, .help = "Keep the dataset order",
       .fixed_on_resume = true},
      {.key = "evaluate", .flag = "--no-eval", .member = &C::evaluate,
       .help = "Skip the test-set evaluation after each epoch"},
      {.key = "init_scale", .flag = "--init-scale", .member = &C::init_scale, .help = "Loss scaler: initial scale",
       .min = 0, .min_open = true},
      {.key = "growth_factor", .flag = "--growth-factor", .member = &C::growth_factor,
       .help = "Loss scaler: growth factor (> 1)", .min = 1, .min_open = true},
      {.key = "backoff_factor", .flag = "--backoff-factor", .member = &C::backoff_factor,
       .help = "Loss scaler: backoff factor in (0, 1)", .min = 0, .max = 1, .min_open = true, .max_open = true},
      {.key = "growth_interval", .flag = "--growth-interval", .member = &C::growth_interval,
       .help = "Loss scaler: clean steps before growing", .min = 1},
      {.key = "hysteresis", .flag = "--hysteresis", .member = &C::hysteresis,
       .help = "Loss scaler: overflows tolerated before backing off", .min = 1},
      {.key = "min_scale", .flag = "--min-scale", .member = &C::min_scale,
       .help = "Loss scaler: lower bound of the scale (0: none)", .min = 0},
      {.key = "clip_grad_norm", .flag = "--clip-grad-norm", .member = &C::clip_grad_norm,
       .help = "Clip the global gradient norm (0: off)", .min = 0},
      {.key = "accumulate", .flag = "--accumulate", .member = &C::accumulate,
       .help = "Micro-batches per optimizer step", .min = 1, .fixed_on_resume = true},
      // 0 (off) or > 1: the values in between are refused by validate().
      {.key = "loss_spike_factor", .flag = "--loss-spike", .member = &C::loss_spike_factor,
       .help = "Treat a loss above this multiple of the median of the last 50 steps as divergence (0: off)",
       .min = 0},
      {.key = "on_divergence", .flag = "--on-divergence", .member = &C::on_divergence,
       .help = "On a NaN/inf loss without a scaler, or a loss spike: stop, or rollback to the last "
               "checkpoint and skip the offending batch",
       .choices = {"stop", "rollback"}},
      {.key = "max_rollbacks", .flag = "--max-rollbacks", .member = &C::max_rollbacks,
       .help = "Rollbacks allowed before a divergence stops the run", .min = 0},
      {.key = "eval_every", .flag = "--eval-every", .member = &C::eval_every,
       .help = "Also evaluate every N steps (0: after each epoch)", .min = 0},
      // Telemetry only (what is trained does not change): not saved, not fixed on resume.
      {.key = "underflow_every", .flag = "--underflow-every", .member = &C::underflow_every,
       .help = "f16 runs: log the scaled gradients' f16 subnormal and flushed-to-zero counts in metrics.jsonl at "
               "steps 1, N+1, 2N+1, ... (0: never)",
       .min = 0, .choices = {}, .saved = false},
      {.key = "save_every", .flag = "--save-every", .member = &C::save_every,
       .help = "Also checkpoint every N steps (0: after each epoch)", .min = 0},
      {.key = "keep_checkpoints", .flag = "--keep-checkpoints", .member = &C::keep_checkpoints,
       .help = "Checkpoints kept in the run directory: the newest N, plus the ones last.json and best.json name "
               "(0: keep every one)",
       .min = 0},
      {.key = "run_dir", .flag = "--run-dir", .member = &C::run_dir,
       .help = "Run directory for config.json, metrics.jsonl, checkpoints and plots "
               "(default: runs/train, runs/train2, ...; 'none': write nothing)",
       .saved = false},
      {.key = "resume", .flag = "--resume", .member = &C::resume,
       .help = "Continue a run exactly: its run directory or a checkpoint", .saved = false},
      {.key = "overwrite", .flag = "--overwrite", .member = &C::overwrite,
       .help = "Let a new run replace the run already in --run-dir (its checkpoints, metrics and config)",
       .saved = false},
      {.key = "init_from", .flag = "--init-from", .member = &C::init_from,
       .help = "Start from weights in a .safetensors file (PyTorch names)", .saved = false},
      {.key = "self_check", .flag = "--no-self-check", .member = &C::self_check,
       .help = "Skip the AMP self-check before 16-bit training", .saved = false},
      {.key = "dist_timeout", .flag = "--dist-timeout", .member = &C::dist_timeout,
       .help = "mpirun jobs: seconds a rank waits for the others before the job ends naming the missing rank",
       .min = 1, .max = 86400, .choices = {}, .saved = false},
      {.key = "dist_check_every", .flag = "--dist-check-every", .member = &C::dist_check_every,
       .help = "mpirun jobs: compare hashes of every rank's weights and loss scale every N steps (0: only at "
               "the start and the end)",
       .min = 0, .choices = {}, .saved = false},
      {.key = "bucket_mb", .flag = "--bucket-mb", .member = &C::bucket_mb,
       .help = "mpirun jobs: reduce gradients in buckets of about this many MB (f32), each started while "
               "backward is still running (0: all at once after backward)",
       .min = 0, .max = 65536, .choices = {}, .saved = false},
      {.key = "allreduce_dtype", .flag = "--allreduce-dtype", .member = &C::allreduce_dtype,
       .help = "mpirun jobs: what gradients travel as: f32, or bf16 (half the bytes; each reduction step adds "
               "in f32 and rounds to bf16)",
       .choices = {"f32", "bf16"}},
      {.key = "sync_bn", .flag = "--sync-bn", .member = &C::sync_bn,
       .help = "mpirun jobs: BatchNorm normalises with the statistics of the whole global batch (all ranks), "
               "as PyTorch's SyncBatchNorm; default: each rank's own samples"},
      // Set by the CLI's --inject-nonfinite STEP[:PARAM] (one flag, two fields).
      {.key = "inject_nonfinite_step", .member = &C::inject_nonfinite_step,
       .help = "Write inf into a gradient at this step (0: never)", .min = 0, .saved = false},
      {.key = "inject_nonfinite_param", .member = &C::inject_nonfinite_param,
       .help = "The parameter whose gradient gets the inf (\"\": the first)", .saved = false},
      {.key = "stop_on_divergence", .member = &C::stop_on_divergence,
       .help = "false: a divergence ends the run early and is reported (compare)", .saved = false},
      // The normalisation the run used, written down so eval and a resume scale inputs alike.
      {.key = "norm_mean", .member = &C::norm_mean, .help = "Per-channel input mean", .fixed_on_resume = true},
      {.key = "norm_std", .member = &C::norm_std, .help = "Per-channel input standard deviation",
       .fixed_on_resume = true},
      {.key = "val_split", .flag = "--val-split", .member = &C::val_split,
       .help = "For data without a test split (an image folder without test/): hold out this fraction of "
               "the training images for evaluation",
       .min = 0, .max = 1, .max_open = true, .fixed_on_resume = true},
      {.key = "random_crop", .flag = "--random-crop", .member = &C::random_crop,
       .help = "Augment training images: pad by N zero pixels and crop back at a random offset (torchvision's "
               "RandomCrop(size, padding=N); 4 is the CIFAR recipe); 0: off",
       .min = 0, .max = 64, .fixed_on_resume = true},
      {.key = "hflip", .flag = "--hflip", .member = &C::hflip,
       .help = "Augment training images: flip left-right with probability 1/2 (not for digits or text)",
       .fixed_on_resume = true},
      {.key = "label_column", .flag = "--label-column", .member = &C::label_column,
       .help = "--dataset csv: the column of the labels (integers 0..255, or names)", .fixed_on_resume = true},
      {.key = "text_column", .flag = "--text-column", .member = &C::text_column,
       .help = "--dataset csv: classify the texts of this column (as bytes) instead of numeric columns; the model "
               "is a model file that starts with an embedding (models/text-encoder.yaml)",
       .fixed_on_resume = true},
      {.key = "skip_bad", .flag = "--skip-bad", .member = &C::skip_bad,
       .help = "--dataset folder/csv: skip and count unreadable or mis-sized images and bad rows (ragged, not a "
               "number, a NUL byte in a text) instead of stopping at the first; the banner says how many",
       .fixed_on_resume = true},
      {.key = "max_tokens", .flag = "--max-tokens", .member = &C::max_tokens,
       .help = "--text-column: bytes of each text the model reads (longer texts are cut, shorter ones padded)",
       .min = 1, .max = 4096, .fixed_on_resume = true},
      // The geometry and class names the data decided (--dataset folder, csv), recorded.
      {.key = "input_channels", .member = &C::input_channels, .help = "Model input channels (0: the model's)",
       .min = 0, .max = 4096, .fixed_on_resume = true},
      {.key = "input_height", .member = &C::input_height, .help = "Model input height (0: the model's)", .min = 0,
       .max = 16384, .fixed_on_resume = true},
      {.key = "input_width", .member = &C::input_width, .help = "Model input width (0: the model's)", .min = 0,
       .max = 16384, .fixed_on_resume = true},
      {.key = "num_classes", .member = &C::num_classes, .help = "Model output classes (0: the model's)", .min = 0,
       .max = 256, .fixed_on_resume = true},
      {.key = "class_names", .member = &C::class_names, .help = "The dataset's class names",
       .fixed_on_resume = true},
      {.key = "feature_names", .member = &C::feature_names, .help = "--dataset csv: the feature columns read",
       .fixed_on_resume = true},
      {.key = "model_text", .member = &C::model_text, .help = "--model FILE.yaml: the model file's text",
       .fixed_on_resume = true},
  };
  return fields;
}

std::string number_text(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

const ConfigField* find_config_field(std::string_view key) {
  for (const ConfigField& f : config_fields())
    if (f.key == key) return &f;
  return nullptr;
}

namespace {

std::string range_text(const ConfigField& f) {
  const bool has_min = std::isfinite(f.min), has_max = std::isfinite(f.max);
  if (has_min && has_max)
    return std::string("in ") + (f.min_open ? "(" : "[") + number_text(f.min) + ", " + number_text(f.max) +
           (f.max_open ? ")" : "]");
  if (has_min) return std::string(f.min_open ? "> " : ">= ") + number_text(f.min);
  if (has_max) return std::string(f.max_open ? "< " : "<= ") + number_text(f.max);
  return "finite";
}

bool in_range(const ConfigField& f, double v) {
  if (!std::isfinite(v)) return false;
  if (f.min_open ? !(v > f.min) : !(v >= f.min)) return false;
  if (f.max_open ? !(v < f.max) : !(v <= f.max)) return false;
  return true;
}

}  // namespace

std::string field_text(const ConfigField& field, const TrainConfig& config) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = config.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) return v;
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, double>) return number_text(v);
        else if constexpr (std::is_same_v<T, std::vector<double>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number_text(v[i]);
          return s + "]";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
          return s + "]";
        } else return std::to_string(v);
      },
      field.member);
}

std::string check_field(const ConfigField& field, const TrainConfig& config) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = config.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (field.choices.empty()) return "";
          // --model also takes a model file; load_data reads and checks it.
          if (field.key == "model" && nn::is_model_file(v)) return "";
          for (const std::string& c : field.choices)
            if (v == c) return "";
          std::string list;
          for (const std::string& c : field.choices) list += (list.empty() ? "" : ", ") + c;
          return "expected one of: " + list + "; got '" + v + "'" + did_you_mean(v, field.choices);
        } else if constexpr (std::is_same_v<T, double> || std::is_integral_v<T>) {
          if constexpr (std::is_same_v<T, bool>) return "";
          else return in_range(field, double(v)) ? "" : "must be " + range_text(field) + ", got " + field_text(field, config);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double x : v)
            if (!std::isfinite(x)) return "must hold finite numbers, got " + field_text(field, config);
          return "";
        } else {
          return "";
        }
      },
      field.member);
}

}  // namespace mixprec::train
