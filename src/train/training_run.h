// training_run.h: one training run (train::run) as small named steps, in the order they run:
//
//   claim_run_dir -> start_threads -> load_datasets -> check_memory -> settle_threads -> choose_precision -> build_model -> restore -> check_recordable -> open_logs
//   -> plan -> announce -> train (train_step, after_step: evaluate_now, save, roll_back) -> finish
//
// Setting up (training_run.cpp; the threads in training_run_threads.cpp) and the loop (trainer.cpp) share the state below; each step
// reads what the steps before it produced. The run directory is resolved once (run_dir_of) and
// the preset parsed once into an amp::Preset.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/data/data.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/threads.h"
#include "mixprec/io/run_dir.h"
#include "mixprec/train/train.h"
#include "train/checkpointing.h"
#include "train/data_parallel.h"
#include "mixprec/train/train_data.h"
#include "train/divergence_guard.h"
#include "train/memory_estimate.h"
#include "train/precision_step.h"

namespace mixprec::train {

// train::run for config.workers > 1 (train_workers.cpp): the run as that many workers, threads
// of this process, each a TrainingRun that is one rank of a data-parallel run.
// The workers of a run that left the count to the default (TrainConfig::workers 0): one per
// usable core when a new run of one process with an adaptive thread count finds other
// processes busy on its cores (mixprec/core/threads.h's choose_workers), else 1.
WorkerChoice default_workers(const TrainConfig& config);
// chosen: why the default chose workers (WorkerChoice::load), for the banner; "" for --workers.
StatusOr<TrainResult> run_workers(const TrainConfig& config, const Callbacks& callbacks,
                                  const std::string& chosen = "");

class TrainingRun {
 public:
  // custom (may be null): the caller's model and data instead of config.model / dataset.
  // ranks (may be null): the communicator of this run's rank when it is one of --workers'
  // threads (train_workers.cpp); null: dist::world(), this process's (mpirun's or one).
  TrainingRun(const TrainConfig& config, const Callbacks& callbacks, const Custom* custom = nullptr,
              dist::Communicator* ranks = nullptr);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  StatusOr<TrainResult> run();
  // Why the default chose this run's workers (choose_workers), said in the banner.
  void set_workers_chosen(std::string why) { workers_chosen_ = std::move(why); }

 private:
  using Clock = std::chrono::steady_clock;
  // What a train step asks the loop to do next.
  enum class Next { go_on, restart_from_checkpoint, stop };

  // ---- setting up (training_run.cpp) ----
  Status claim_run_dir();     // one run per run directory: locked before anything is read
  // ---- what it computes on (training_run_threads.cpp) ----
  // The thread count: --threads's, a worker's 1, the quota's, or (a new run of one process)
  // an adaptive policy measuring over the set-up; settle_threads() decides it, records it in
  // config.json and says why in the banner.
  void start_threads();
  void settle_threads();
  Status load_datasets();     // both splits, the loader, the normalisation to record
  Status take_custom_data();  // load_datasets for a Custom run
  // Refuses (resource_exhausted) a run whose estimated memory exceeds what the machine has,
  // before the self-check and the first step allocate a full batch (memory_estimate.h).
  Status check_memory();
  void choose_precision();    // the preset, or fp32 when the AMP self-check fails
  Status build_model();       // seeded init, --init-from, the PrecisionStep around it
  Status restore();           // --resume: model, optimizer, scaler, RNG, position
  // What config.json and every checkpoint will hold can be encoded (UTF-8 JSON): refused now,
  // not at the first checkpoint after the work.
  Status check_recordable();
  Status open_logs();         // config.json and metrics.jsonl in the run directory
  Status plan();              // steps per epoch and in all, checked against the data
  void announce();            // the resolved-configuration table (Callbacks::on_start)
  // mpirun jobs: refuse what one process can do but N cannot yet, and make this rank's
  // DataParallel (before claim_run_dir: only rank 0 writes).
  Status join_ranks();
  // mpirun jobs: the ranks run the same config, binary and data from the same weights.
  Status check_ranks_agree();
  TrainResult finish();       // timings, memory, scaler figures into the result
  // A resume of a run that had already done every planned step: described, nothing trained.
  void warn_about_small_run();
  void describe_finished_run();

  // ---- the loop (trainer.cpp) ----
  Status train();
  StatusOr<Next> train_step(int64_t epoch, int64_t batch);
  std::string augmentation_text() const;  // the banner's description of --random-crop/--hflip
  std::string data_shape_text() const;    // the banner's classes and input of data the user brought
  // Evaluation, checkpoint and Ctrl-C after a step (or a skipped batch).
  StatusOr<Next> after_step(int64_t epoch, int64_t batch, bool skipped_batch);
  StatusOr<bool> evaluate_now(int64_t epoch);  // true: the best accuracy so far
  // Only a finite, resumable state becomes a checkpoint (save_checked); anything else is
  // reported and never becomes last.json's or a rollback's target.
  Status save(const Position& at, bool is_best);
  // Back to the last good checkpoint: model, optimizer, scaler, RNG and data position; the
  // logs forget the steps after it.
  Status roll_back(int64_t epoch, int64_t batch, const std::string& why);
  void report_step(int64_t epoch, const PrecisionStep::Outcome& out);

  const TrainConfig& config_;
  const Callbacks& cb_;
  const Custom* custom_;
  dist::Communicator* ranks_;
  TrainResult result_;

  std::string run_dir_path_;  // "" when nothing is written
  std::unique_ptr<RunDirLock> run_dir_lock_;
  nn::ModelSpec spec_;
  DataSplits data_;
  std::optional<MemoryEstimate> memory_estimate_;  // check_memory's, when it ran (TrainResult reports it)
  TrainConfig recorded_config_;  // config_ with the normalisation the loader applies (and the adaptive thread count)
  std::string workers_chosen_;  // set_workers_chosen
  std::string threads_note_;     // the banner's words after the thread count: " (adaptive: ...)"
  std::unique_ptr<DataLoader> loader_;
  amp::Preset preset_;
  std::unique_ptr<PrecisionStep> step_;
  std::unique_ptr<DataParallel> dp_;  // null in one process
  std::unique_ptr<ThreadPolicy> adaptive_;  // a new run's adaptive thread count, until settle_threads
  std::shared_ptr<const ImageDataset> eval_shard_;  // data-parallel: this rank's share of the test set

  Position pos_;  // where the next step starts
  // Checkpoints a rollback may return to, oldest first: only finite, resumable ones.
  std::vector<std::string> rollback_candidates_;
  std::optional<RunDir> run_dir_;
  std::unique_ptr<MetricsLog> metrics_;
  double time_offset_ = 0.0;  // metrics "time" stays monotone across resumes
  int64_t per_epoch_ = 0, total_ = 0;

  Clock::time_point t_start_, window_start_;
  std::vector<double> step_seconds_;
  int64_t global_step_ = 0, window_images_ = 0;
  std::vector<Batch> micro_;
  DivergenceGuard guard_;
  std::map<std::string, int64_t> skipped_by_tensor_;
  bool injected_ = false;
};

}  // namespace mixprec::train
