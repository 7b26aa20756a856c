// training_run.cpp: setting a training run up, step by step (training_run.h), and what it
// reports at the end. The loop itself is in trainer.cpp, the banner in training_run_report.cpp.
#include "train/training_run.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "mixprec/autograd/autograd.h"
#include "mixprec/dist/distributed.h"
#include "mixprec/core/memory.h"
#include "mixprec/core/names.h"
#include "mixprec/train/train_config.h"
#include "mixprec/core/threads.h"
#include "train/memory_estimate.h"
#include "train/self_check.h"

namespace mixprec::train {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Training seconds the resumed run had logged up to `through_step` (its metrics "time"), so
// that the time of the steps after a resume continues from there instead of restarting at 0.
double logged_seconds(const std::string& metrics_path, int64_t through_step) {
  auto file = read_metrics(metrics_path);
  if (!file.is_ok()) return 0.0;
  double t = 0.0;
  for (const MetricsRecord& r : file->records)
    if (r.kind == MetricsRecord::Kind::step && r.step <= through_step && std::isfinite(r.seconds))
      t = std::max(t, r.seconds);
  return t;
}

// A resume is refused as a checkpoint problem (exit code 4 in the CLI).
Status as_checkpoint_error(const Status& s) { return Status(StatusCode::bad_checkpoint, s.message()); }

}  // namespace

TrainingRun::TrainingRun(const TrainConfig& config, const Callbacks& callbacks, const Custom* custom,
                         dist::Communicator* ranks)
    : config_(config), cb_(callbacks), custom_(custom), ranks_(ranks), guard_(config.loss_spike_factor) {}

TrainingRun::~TrainingRun() = default;

Status TrainingRun::claim_run_dir() {
  if (dp_ && dp_->rank() != 0) return Status::ok();  // rank 0 writes the run directory
  run_dir_path_ = run_dir_of(config_);
  if (run_dir_path_.empty()) return Status::ok();
  const RunDirMode mode = !config_.resume.empty() ? RunDirMode::resume
                          : config_.overwrite     ? RunDirMode::overwrite
                                                  : RunDirMode::fresh;
  auto lock = mixprec::claim_run_dir(run_dir_path_, mode);
  if (!lock.is_ok()) return lock.status();
  run_dir_lock_ = std::move(lock).value();
  return Status::ok();
}

// A Custom run's data as given (statistics computed when missing) and its model as a spec
// whose factory is the caller's.
Status TrainingRun::take_custom_data() {
  const Custom& c = *custom_;
  if (!c.make_model) return Status::invalid_argument("custom run: make_model is not set");
  if (!c.train || !c.test) return Status::invalid_argument("custom run: both train and test datasets are needed");
  for (const auto* d : {c.train.get(), c.test.get()}) MIXPREC_RETURN_IF_ERROR(d->validate());
  if (c.train->count == 0) return Status::invalid_argument("custom run: the training set is empty");
  if (c.test->sample_bytes() != c.train->sample_bytes() || c.test->tabular != c.train->tabular ||
      c.test->text != c.train->text)
    return Status::invalid_argument("custom run: the test samples differ in shape or kind from the training samples");
  auto with_stats = [&](std::shared_ptr<const ImageDataset> d) -> std::shared_ptr<const ImageDataset> {
    if (!d->mean.empty() || d->text || d->tokens) return d;
    auto copy = std::make_shared<ImageDataset>(*d);
    compute_normalisation(*c.train, copy->mean, copy->stddev);  // the training set's, for both
    return copy;
  };
  data_.train = with_stats(c.train);
  data_.test = with_stats(c.test);
  spec_ = nn::ModelSpec{c.model_name, c.train->channels, c.train->height, c.train->width,
                        std::max(c.train->num_classes, c.test->num_classes), c.train->text, "", c.make_model};
  data_.spec = spec_;
  return Status::ok();
}

Status TrainingRun::load_datasets() {
  if (custom_) {
    MIXPREC_RETURN_IF_ERROR(take_custom_data());
  } else {
    auto spec = model_spec_of(config_);  // validate() checked a built-in name; a model file is read here
    if (!spec.is_ok()) return spec.status();
    spec_ = *spec;
    auto data = load_data(config_, spec_);
    if (!data.is_ok()) return data.status();
    data_ = *data;
    spec_ = data_.spec;
  }
  if (!spec_.file_text.empty())  // a model file's mistakes, before anything runs
    if (auto built = nn::build_model(spec_); !built.is_ok()) return built.status();
  // Written down in config.json and checkpoints, so eval and a resume scale inputs the same
  // way and build the same model.
  recorded_config_ = config_;
  recorded_config_.norm_mean = data_.train->mean;
  recorded_config_.norm_std = data_.train->stddev;
  record_geometry(recorded_config_, data_);
  if ((data_.train->text || data_.train->tokens || data_.train->tabular) && (config_.random_crop > 0 || config_.hflip))
    return Status::invalid_argument("--random-crop/--hflip: dataset " + config_.dataset + " is " +
                                    (data_.train->text || data_.train->tokens ? "text" : "a table") +
                                    "; augmentation is for images");
  // Under mpirun each rank reads its shard of every global batch (data_parallel.h).
  const int ranks = dp_ ? dp_->ranks() : 1;
  loader_ = std::make_unique<DataLoader>(
      data_.train, DataLoaderOptions{.batch_size = config_.batch_size / ranks, .shuffle = config_.shuffle,
                                     .seed = config_.seed,
                                     .augment = {.crop_padding = config_.random_crop, .hflip = config_.hflip},
                                     .shard_rank = dp_ ? dp_->rank() : 0, .shard_count = ranks});
  return Status::ok();
}

Status TrainingRun::check_memory() {
  const auto machine = machine_memory();
  if (!machine) return Status::ok();  // MIXPREC_MEMORY_LIMIT=off, or nothing to read
  const int64_t batch = config_.batch_size / (dp_ ? dp_->ranks() : 1);
  const amp::Preset preset = amp::preset_by_name(config_.precision).value();  // validate() checked it
  auto estimate = spec_.file_text.empty() ? measure_model_memory(spec_, config_, preset, data_.train, batch)
                                          : estimate_model_file_memory(spec_, config_, preset, batch);
  if (!estimate.is_ok()) return estimate.status();
  if (config_.workers > 1) {  // the workers are one process: each holds its replica and its shard's activations
    estimate->weight_bytes *= config_.workers;
    estimate->total_bytes = estimate->weight_bytes +
                            estimate->activation_bytes_per_sample * estimate->batch * config_.workers;
    estimate->method += ", x " + std::to_string(config_.workers) + " workers";
  }
  memory_estimate_ = *estimate;
  Status fits = check_fits_in_memory(*estimate, *machine);
  if (!fits.is_ok() && !workers_chosen_.empty())  // the user did not ask for the replicas
    return Status(fits.code(), fits.message() + " (the default chose " + std::to_string(config_.workers) +
                                   " workers, a replica each, because " + workers_chosen_ +
                                   ": --workers 1 trains one)");
  return fits;
}

void TrainingRun::choose_precision() {
  preset_ = amp::preset_by_name(config_.precision).value();  // validate() checked the name
  if (!config_.self_check || preset_.name == "fp32") return;
  loader_->set_epoch(0);
  auto first = loader_->next();
  SelfCheckResult check = amp_self_check(preset_, spec_, config_, *first);
  result_.self_check = check.summary;
  if (dp_) {  // every rank falls back, or none: they must train the same model
    auto failed_somewhere = dp_->any(!check.passed, "the AMP self-check's result");
    throw_if_error(failed_somewhere.status());
    if (*failed_somewhere && check.passed) {
      check.passed = false;
      check.summary += " here, but failed on another rank";
    }
  }
  if (check.passed) return;
  if (cb_.on_warning)
    cb_.on_warning(check.summary + "; falling back to fp32 (pass --precision fp32 to silence, "
                   "or check MIXPREC_VERBOSE=dispatch)");
  preset_ = amp::preset_by_name("fp32").value();
}

Status TrainingRun::build_model() {
  // Same seed, same initial weights in every preset: drawn in f32, then converted.
  manual_seed(config_.seed);
  auto built = nn::build_model(spec_);
  if (!built.is_ok()) return built.status();
  auto model = std::move(built).value();
  if (!config_.init_from.empty()) {
    // A file that cannot serve as weights is a checkpoint problem (exit code 4 in the CLI).
    if (Status loaded = load_weights(*model, config_.init_from); !loaded.is_ok())
      return Status(StatusCode::bad_checkpoint, "--init-from: " + loaded.message());
  }
  if (!config_.inject_nonfinite_param.empty()) {
    std::string names;
    std::vector<std::string> all;
    for (const auto& [name, p] : model->named_parameters()) {
      all.push_back(name);
      names += (names.empty() ? "" : ", ") + name;
    }
    if (std::find(all.begin(), all.end(), config_.inject_nonfinite_param) == all.end())
      return Status::invalid_argument("--inject-nonfinite: model " + config_.model + " has no parameter '" +
                                      config_.inject_nonfinite_param + "'" +
                                      did_you_mean(config_.inject_nonfinite_param, all) + "; its parameters: " + names);
  }
  step_ = std::make_unique<PrecisionStep>(preset_, model, config_);
  if (dp_) {
    step_->set_data_parallel(dp_.get());
    if (config_.sync_bn) step_->set_batch_norm_sync(dp_->batch_norm_sync());
    step_->scaler().set_found_inf_combiner([dp = dp_.get()](bool found) {
      auto any = dp->any(found, "combining the ranks' found-inf flags");
      throw_if_error(any.status());
      return *any;
    });
  }
  return Status::ok();
}

Status TrainingRun::restore() {
  if (config_.resume.empty()) return Status::ok();
  auto usable = resolve_usable_checkpoint(config_.resume);  // skips non-finite ones in a run dir
  if (!usable.is_ok()) return as_checkpoint_error(usable.status());
  const std::string& file = usable->file;
  if (cb_.on_warning && !usable->skipped.empty()) {
    for (const std::string& why : usable->skipped) cb_.on_warning("resume: passed over " + why);
    cb_.on_warning("resume: continuing from " + file + " (step " + std::to_string(usable->state.global_step) +
                   "), the newest usable checkpoint");
  }
  rollback_candidates_.push_back(file);
  auto restored = restore_state(*step_, usable->state, file);
  if (!restored.is_ok()) return as_checkpoint_error(restored.status());
  pos_ = *restored;
  result_.first_step = pos_.global_step + 1;
  return Status::ok();
}

Status TrainingRun::check_recordable() {
  // Every rank checks (the same config gives the same answer), so that they stop together.
  if (run_dir_of(config_).empty()) return Status::ok();  // --run-dir none: nothing is recorded
  MIXPREC_RETURN_IF_ERROR(train::check_recordable(recorded_config_));
  // The checkpoint's own strings besides the config: tensor names, model name, precision.
  return check_checkpoint_encodable(capture_state(*step_, recorded_config_, pos_));
}

Status TrainingRun::open_logs() {
  if (run_dir_path_.empty()) return Status::ok();
  const bool fresh = config_.resume.empty();
  auto rd = open_run_dir(run_dir_path_, fresh ? config_to_json(recorded_config_) : "");
  if (!rd.is_ok()) return rd.status();
  run_dir_ = *rd;
  auto log = MetricsLog::open(run_dir_->metrics_path(), fresh ? std::optional<int64_t>() : pos_.global_step);
  if (!log.is_ok()) return log.status();
  metrics_ = std::move(log).value();
  result_.run_dir = run_dir_->path;
  time_offset_ = fresh ? 0.0 : logged_seconds(run_dir_->metrics_path(), pos_.global_step);
  return Status::ok();
}

Status TrainingRun::plan() {
  const int64_t batches = loader_->num_batches();
  if (batches < 1)
    return Status::invalid_argument("--batch-size: " + std::to_string(config_.batch_size) +
                                    " is larger than the training set (" + std::to_string(data_.train->count) +
                                    " examples)");
  per_epoch_ = batches / config_.accumulate;
  if (per_epoch_ < 1)
    return Status::invalid_argument("--accumulate: " + std::to_string(config_.accumulate) +
                                    " micro-batches per step, but an epoch has only " + std::to_string(batches) +
                                    " batches");
  if (!config_.resume.empty() && pos_.batch_in_epoch >= per_epoch_)
    return Status(StatusCode::bad_checkpoint,
                  "checkpoint '" + rollback_candidates_.front() + "': metadata key 'batch_in_epoch': " +
                      std::to_string(pos_.batch_in_epoch) + " is past this run's " + std::to_string(per_epoch_) +
                      " steps per epoch (expected 0.." + std::to_string(per_epoch_ - 1) + ")");
  total_ = per_epoch_ * config_.epochs;
  if (config_.max_steps > 0) total_ = std::min(total_, config_.max_steps);
  result_.planned_steps = total_;
  warn_about_small_run();
  result_.precision = preset_.name;
  result_.loss_scaling = step_->scaler().is_enabled();
  return Status::ok();
}

void TrainingRun::describe_finished_run() {
  result_.already_finished = true;
  result_.steps = pos_.global_step;
  result_.last_checkpoint = rollback_candidates_.empty() ? std::string() : rollback_candidates_.back();
  if (!run_dir_) return;
  auto file = read_metrics(run_dir_->metrics_path());
  if (!file.is_ok()) return;
  for (const MetricsRecord& m : file->records) {
    if (m.kind != MetricsRecord::Kind::eval || m.step > pos_.global_step) continue;
    EvalReport e;
    e.epoch = m.epoch;
    e.step = m.step;
    e.accuracy = m.accuracy;
    e.loss = m.loss;
    result_.evals.push_back(e);
    result_.best_accuracy = std::max(result_.best_accuracy, e.accuracy);
    result_.final_accuracy = e.accuracy;
  }
}

TrainResult TrainingRun::finish() {
  result_.steps = global_step_;
  result_.seconds = std::chrono::duration<double>(Clock::now() - t_start_).count();
  result_.seconds_per_step = median(step_seconds_);
  for (double sec : step_seconds_) result_.step_seconds += sec;
  result_.ranks = dp_ ? dp_->ranks() : 1;
  if (dp_) {
    result_.gradient_buckets = dp_->buckets_reduced();
    result_.gradient_buckets_early = dp_->buckets_started_early();
  }
  result_.peak_activation_bytes = peak_bytes(MemoryCategory::activations);
  result_.peak_total_bytes = memory_stats().total_peak;
  result_.estimated_memory_bytes = memory_estimate_ ? memory_estimate_->total_bytes : 0;
  result_.skipped_steps = step_->scaler().skipped_steps();
  result_.final_scale = step_->scaler().get_scale();
  result_.precision = preset_.name;
  std::vector<std::pair<std::string, int64_t>> most_first(skipped_by_tensor_.begin(), skipped_by_tensor_.end());
  std::stable_sort(most_first.begin(), most_first.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  result_.skipped_by_tensor = std::move(most_first);
  return std::move(result_);
}

StatusOr<TrainResult> TrainingRun::run() {
  MIXPREC_RETURN_IF_ERROR(validate(config_, /*check_names=*/custom_ == nullptr));
  MIXPREC_RETURN_IF_ERROR(join_ranks());
  MIXPREC_RETURN_IF_ERROR(claim_run_dir());
  start_threads();
  MIXPREC_RETURN_IF_ERROR(load_datasets());
  MIXPREC_RETURN_IF_ERROR(check_memory());
  settle_threads();
  choose_precision();
  MIXPREC_RETURN_IF_ERROR(build_model());
  MIXPREC_RETURN_IF_ERROR(restore());
  MIXPREC_RETURN_IF_ERROR(check_recordable());
  MIXPREC_RETURN_IF_ERROR(check_ranks_agree());
  MIXPREC_RETURN_IF_ERROR(open_logs());
  MIXPREC_RETURN_IF_ERROR(plan());
  if (!config_.resume.empty() && pos_.global_step >= total_) {  // nothing left to do: say so
    describe_finished_run();
    return std::move(result_);
  }
  announce();
  MIXPREC_RETURN_IF_ERROR(train());
  return finish();
}

StatusOr<TrainResult> run(const TrainConfig& config, const Callbacks& callbacks) {
  TrainConfig c = config;
  if (c.workers == 0) {  // the default (train.h)
    const WorkerChoice w = default_workers(c);
    c.workers = w.workers;
    if (w.workers > 1) {
      c.sync_bn = true;  // a BatchNorm layer's statistics stay the whole batch's, as in one process
      return run_workers(c, callbacks, w.load);
    }
  }
  if (c.workers > 1) return run_workers(c, callbacks);
  TrainingRun training(c, callbacks);
  return training.run();
}

StatusOr<TrainResult> run(const TrainConfig& config, const Custom& custom, const Callbacks& callbacks) {
  TrainConfig c = config;
  c.model = custom.model_name;
  c.dataset = "custom";
  if (c.workers == 0) c.workers = 1;  // the default's choice is not made for a caller's own model
  if (c.workers > 1)  // each worker would call the caller's model factory and read its data at once
    return Status::invalid_argument("--workers: a run with the caller's own model and data (mixprec.train from "
                                    "Python with a Module, the C++ Custom API) runs in one worker; got " +
                                    std::to_string(c.workers));
  TrainingRun training(c, callbacks, &custom);
  return training.run();
}

}  // namespace mixprec::train
