// train.h: the training loop behind `mixprec train`: data, model, optimizer, evaluation and
// reporting through callbacks (the CLI draws progress from them; tests read them).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/data/data.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {
class Module;
}

namespace mixprec::train {

struct TrainConfig {
  std::string model = "cnn";               // cnn (1x28x28), seed-cnn (3x32x32), mlp
  std::string dataset = "fashion-mnist";   // fashion-mnist, mnist, cifar10, synthetic
  std::string data_dir;                    // empty: the dataset's default location
  std::string precision = "amp-bf16";      // a preset (docs/precision.md): fp32, amp-bf16, ...
  int64_t epochs = 2;
  int64_t max_steps = -1;                  // stop after this many optimizer steps (-1: no limit)
  int64_t batch_size = 256;
  double lr = 1e-3;
  // The learning rate over the run (lr_at): constant, or after `warmup_steps` of linear
  // warm-up a cosine or linear decay from lr to min_lr at the last planned step.
  std::string lr_schedule = "constant";    // constant, cosine, linear
  int64_t warmup_steps = 0;
  double min_lr = 0.0;
  std::string optimizer = "adam";          // adam, adamw, sgd
  double momentum = 0.9;                   // sgd only
  double weight_decay = 0.0;
  uint64_t seed = 0;
  int threads = 0;                         // 0: all cores
  // > 1: the run as that many workers, threads of this process that are the ranks of a
  // data-parallel run (mpirun -np N's arithmetic, no MPI), each on batch / N samples of every
  // batch with `threads` OpenMP threads (1 when 0): they meet a few times per step instead of
  // at every parallel region's barrier, and keep their share of a busy machine's cores.
  // 0: chosen by a new run of one process with neither `threads` nor OMP_NUM_THREADS set:
  // one per usable core when other processes keep some of them busy (with sync_bn, so that a
  // BatchNorm layer's statistics stay the whole batch's), else 1 (mixprec/core/threads.h's
  // choose_workers); config.json records the count chosen.
  int workers = 0;
  int64_t train_subset = -1;               // use only the first N training images (-1: all)
  int64_t test_subset = -1;
  bool shuffle = true;
  bool evaluate = true;                    // test accuracy after each epoch
  bool stop_on_divergence = true;          // false: end the run early and report it (compare)
  double loss_spike_factor = 0.0;          // > 0: a loss above this x the median of the last 50 diverges
  std::string on_divergence = "stop";      // stop | rollback (to the last checkpoint, skipping the batch)
  int64_t max_rollbacks = 3;               // rollbacks allowed before a divergence stops the run
  // GradScaler options (used by presets with loss scaling; PyTorch's defaults).
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;
  double min_scale = 0.0;                  // 0: no minimum
  double clip_grad_norm = 0.0;             // > 0: clip the global gradient norm (after unscale)
  int64_t accumulate = 1;                  // micro-batches per optimizer step
  int64_t inject_nonfinite_step = 0;       // > 0: write inf into a gradient at this step
  std::string inject_nonfinite_param;      // which parameter ("" = the first)
  bool self_check = true;                  // 16-bit presets: compare with fp32 on one batch first
  // Data-parallel runs (mpirun -np N; docs/distributed.md): how long a rank waits for the
  // others before the job ends, and how often the ranks compare hashes of their weights.
  double dist_timeout = 60.0;              // seconds
  int64_t dist_check_every = 100;          // steps (0: only at the start and the end)
  // How gradients are reduced across ranks: buckets of this many MB of f32 started during
  // backward (0: all at once after backward), and in which dtype they travel (f32 | bf16).
  double bucket_mb = 25.0;
  std::string allreduce_dtype = "f32";
  bool sync_bn = false;                    // BatchNorm statistics over all ranks' samples
  // Run directory and checkpoints (empty run_dir: nothing is written).
  std::string run_dir;                     // e.g. "runs/train3": config.json, metrics.jsonl, checkpoints
  int64_t save_every = 0;                  // also checkpoint every N steps (0: after each epoch only)
  // Checkpoints kept: the newest N, plus whatever last.json and best.json name (0: all).
  int64_t keep_checkpoints = 3;
  int64_t eval_every = 0;                  // also evaluate every N steps (0: after each epoch only)
  // f16 runs: count the scaled gradients' f16 subnormal and flushed elements into
  // metrics.jsonl at steps 1, N+1, 2N+1, ... (0: never; docs/amp.md, "Underflow telemetry").
  int64_t underflow_every = 10;
  std::string resume;                      // a run directory or checkpoint to continue exactly
  bool overwrite = false;                  // a new run may replace the run in run_dir (not with resume)
  std::string init_from;                   // a .safetensors file of weights to start from
  // Input normalisation x = (pixel / 255 - mean[c]) / std[c], one value per channel. Empty:
  // the dataset's own (Fashion-MNIST 0.2860 / 0.3530, ...). A run records the values it used
  // in config.json and in each checkpoint's config, and eval reads them back from there.
  std::vector<double> norm_mean, norm_std;
  // Held out from the training data for evaluation, for a dataset without a test split (an
  // image folder without test/): this fraction, chosen by a fixed permutation (seed 0).
  double val_split = 0.0;
  // Training-image augmentation (data.h Augmentation): pad-and-crop, left-right flip.
  int64_t random_crop = 0;
  bool hflip = false;
  // The model's input and classes when the data decides them (--dataset folder), recorded so
  // that eval, predict and a resume build the same model; 0: the model's own (models.h).
  int64_t input_channels = 0, input_height = 0, input_width = 0, num_classes = 0;
  std::vector<std::string> class_names;    // recorded: the dataset's class names, if it has them
  // --dataset csv: the column holding the labels; the feature columns the run read (recorded,
  // so a test file and predict's input are read by name, in the same order).
  std::string label_column = "label";
  std::vector<std::string> feature_names;
  // --dataset csv --text-column NAME: that column's texts are classified (each as its first
  // max_tokens bytes, 0-padded) by a model file that starts with an embedding layer.
  std::string text_column;
  int64_t max_tokens = 128;
  // --dataset folder / csv: skip (and count) unreadable images and bad rows instead of
  // stopping at the first one.
  bool skip_bad = false;
  // --model FILE.yaml: the model file's text, recorded, so eval, predict and a resume build the
  // network the run trained (the file may have changed or moved since).
  std::string model_text;
};

struct StepReport {
  int64_t step = 0;          // 1-based optimizer step
  int64_t total_steps = 0;   // planned steps of the whole run
  int64_t epoch = 0;         // 0-based
  double loss = 0.0;
  double lr = 0.0;
  double scale = 1.0;        // loss scale in force for this step (1 without scaling)
  bool skipped = false;      // the scaler skipped this step's update (inf/NaN gradients)
  int64_t skipped_total = 0;
  double images_per_second = 0.0;  // over the last report interval (a language model: sequences)
  double tokens_per_second = 0.0;  // a language model: predicted bytes per second; else 0
  double elapsed_seconds = 0.0;
  bool loss_scaling = false;       // a GradScaler runs (scale is meaningful)
  // A skipped step: the first parameter whose gradient held inf/NaN, how many of its values
  // did, and how many parameters were affected in all.
  std::string nonfinite_tensor;
  int64_t nonfinite_values = 0, nonfinite_tensors = 0;
};

struct EvalReport {
  int64_t epoch = 0;
  int64_t step = 0;
  double accuracy = 0.0;  // in [0, 1]
  double loss = 0.0;      // mean cross-entropy in nats (a language model: per byte)
  int64_t samples = 0;    // images, or for a language model the bytes predicted
  bool next_byte = false; // a language model: every position predicts the next byte
};

struct TrainResult {
  std::vector<double> losses;  // one per step
  std::vector<EvalReport> evals;
  double best_accuracy = 0.0;
  double final_accuracy = 0.0;
  int64_t steps = 0;
  double seconds = 0.0;
  double seconds_per_step = 0.0;       // median over the run (excludes evaluation)
  // Data-parallel runs: this rank's steps in all, and the part of them it spent blocked on the
  // other ranks (step rendezvous, gradient buckets not yet reduced, loss, flags, buffers).
  // And the gradient buckets it reduced, and how many of them started while backward ran.
  int ranks = 1;
  double step_seconds = 0.0, communication_seconds = 0.0;
  int64_t gradient_buckets = 0, gradient_buckets_early = 0;
  int64_t peak_activation_bytes = 0;   // tracked allocator, activations category
  int64_t peak_total_bytes = 0;
  // The memory the run was estimated to need before it started (docs/cli.md, Memory); 0 when
  // the check was off (MIXPREC_MEMORY_LIMIT=off).
  int64_t estimated_memory_bytes = 0;
  int64_t skipped_steps = 0;
  double final_scale = 1.0;
  bool diverged = false;               // only with stop_on_divergence = false
  int64_t diverged_at_step = 0;
  int64_t rollbacks = 0;               // --on-divergence rollback: how many happened
  std::string precision;               // the preset that ran (fp32 if the self-check fell back)
  std::string self_check;              // what the AMP self-check found ("" if it did not run)
  std::string last_checkpoint;         // path of the last checkpoint written ("" if none)
  int64_t first_step = 1;              // > 1 when resumed
  bool loss_scaling = false;           // the preset that ran has a GradScaler
  // Per parameter: in how many skipped steps its gradient held inf/NaN (most first).
  std::vector<std::pair<std::string, int64_t>> skipped_by_tensor;
  // --resume of a run that had already done all its steps: nothing ran; steps, evals and the
  // accuracies describe the finished run (from its checkpoint and metrics.jsonl).
  bool already_finished = false;
  int64_t planned_steps = 0;           // total steps of the run as configured
  // Callbacks::stop_requested said stop (Ctrl-C): the run saved a checkpoint of the step it
  // had reached (when it has a run directory) and returned early.
  bool interrupted = false;
  std::string run_dir;                 // the run directory written ("" if none)
};

struct Callbacks {
  std::function<void(const std::string&)> on_warning;  // e.g. the AMP self-check fell back
  std::function<void(const TrainConfig&, const std::vector<std::pair<std::string, std::string>>&)>
      on_start;                                   // the resolved configuration table
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EvalReport&)> on_eval;
  // Polled after every step; true ends the run cleanly (checkpoint, metrics) as interrupted.
  std::function<bool()> stop_requested;
};

// The run directory a run writes to: --run-dir, or for --resume the directory given or the
// one holding the checkpoint file ("." for a bare file name); "" when neither is set (or the
// --resume path does not exist: the resume then fails on its own, nothing gets created).
std::string run_dir_of(const TrainConfig& config);

// Checks a configuration without touching data (flag values, names). check_names = false
// skips the model and dataset names (a Custom run brings its own).
Status validate(const TrainConfig& config, bool check_names = true);

// The learning rate of optimizer step `step` (1-based) of a run of `total_steps`:
// warm-up: lr * step / warmup_steps for step <= warmup_steps; then constant: lr; cosine:
// min_lr + (lr - min_lr) (1 + cos(pi p)) / 2; linear: lr - (lr - min_lr) p, where
// p = (step - warmup_steps - 1) / (total_steps - warmup_steps - 1) goes from 0 at the first
// step after warm-up to 1 at the last (the shape of HF's get_cosine_schedule_with_warmup,
// ending at min_lr as PyTorch's CosineAnnealingLR's eta_min). A function of the step alone,
// so a resume continues it exactly. The training loop counts only applied steps: a step the
// GradScaler skipped (inf/NaN gradients) does not advance the schedule.
double lr_at(const TrainConfig& config, int64_t step, int64_t total_steps);

// Runs the whole training. Errors: invalid_argument (bad config), not_found / data_loss
// (dataset), diverged when the loss becomes NaN/inf without a scaler or spikes past
// loss_spike_factor (after max_rollbacks rollbacks with on_divergence = "rollback").
StatusOr<TrainResult> run(const TrainConfig& config, const Callbacks& callbacks = {});

// A model and data of the caller's own, for run() below.
struct Custom {
  // Recorded as the run's model (config.json, checkpoints); a resume must pass the same name.
  std::string model_name = "custom";
  // Builds the model; called after the run seeds the generator (manual_seed(config.seed)),
  // so a factory that initialises from it gives the same weights for the same seed. Also
  // called by the AMP self-check for its reference copy.
  std::function<std::shared_ptr<nn::Module>()> make_model;
  // Samples and labels (data.h). mean/stddev, if empty, are computed from `train`.
  std::shared_ptr<const ImageDataset> train, test;
};
// run() for a custom model and data, with everything the built-ins get: the run directory,
// metrics, checkpoints, bit-exact --resume (pass the same Custom again), the divergence guard,
// the AMP self-check, every preset. config.model and config.dataset are ignored (the run
// records custom.model_name and dataset "custom"); eval/predict of the CLI cannot rebuild such
// a model, the caller's program does.
StatusOr<TrainResult> run(const TrainConfig& config, const Custom& custom, const Callbacks& callbacks = {});

}  // namespace mixprec::train
