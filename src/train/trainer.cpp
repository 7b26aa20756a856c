// trainer.cpp: the training loop. Per optimizer step: `accumulate` micro-batches through
// PrecisionStep (autocast, scaler, masters); evaluation after each epoch; progress through
// callbacks. A DivergenceGuard watches each loss: on divergence the run stops (the last good
// checkpoint untouched) or, with on_divergence = rollback, restarts from that checkpoint and
// steps over the offending batch.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "mixprec/autograd.h"
#include "mixprec/data.h"
#include "mixprec/models.h"
#include "mixprec/ops.h"
#include "mixprec/precision.h"
#include "mixprec/train.h"
#include "mixprec/checkpoint.h"
#include "mixprec/run_dir.h"
#include "train/checkpointing.h"
#include "train/config_json.h"
#include "train/data_source.h"
#include "train/divergence_guard.h"
#include "train/precision_step.h"
#include "train/self_check.h"

namespace mixprec::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

EvalReport evaluate(PrecisionStep& step, const std::shared_ptr<const ImageDataset>& test,
                    int64_t batch_size) {
  step.model().eval();
  DataLoader loader(test, {.batch_size = batch_size, .shuffle = false, .prefetch = 1});
  EvalReport r;
  int64_t correct = 0;
  double loss_sum = 0.0;
  while (auto batch = loader.next()) {
    Tensor logits = step.predict(batch->images);
    NoGradGuard ng;
    loss_sum += cross_entropy(logits, batch->labels, Reduction::sum).item();
    const Tensor pred = argmax(logits);
    const int64_t* p = pred.data_ptr<int64_t>();
    const int64_t* y = batch->labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < pred.numel(); ++i) correct += p[i] == y[i];
    r.samples += pred.numel();
  }
  step.model().train();
  r.accuracy = r.samples ? double(correct) / double(r.samples) : 0.0;
  r.loss = r.samples ? loss_sum / double(r.samples) : 0.0;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// ---- what a run reports about itself (the CLI's first-run polish) ----

// The shortest text that reads back as v: 65536, 0.001, 1e-08 (not "65536.000000").
std::string format_number(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// The configuration as the run used it, for config.json and checkpoints: the normalisation
// the data loader applied is written down, so eval and a resume scale inputs the same way.
TrainConfig recorded_config(TrainConfig c, const DataSplits& data) {
  c.norm_mean = data.train->mean;
  c.norm_std = data.train->stddev;
  return c;
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

// A resume of a run that had already done every planned step: its evaluations (from
// metrics.jsonl) describe it, nothing is trained.
void describe_finished_run(const std::string& metrics_path, int64_t step, TrainResult& r) {
  r.already_finished = true;
  r.steps = step;
  auto file = read_metrics(metrics_path);
  if (!file.is_ok()) return;
  for (const MetricsRecord& m : file->records) {
    if (m.kind != MetricsRecord::Kind::eval || m.step > step) continue;
    EvalReport e;
    e.epoch = m.epoch;
    e.step = m.step;
    e.accuracy = m.accuracy;
    e.loss = m.loss;
    r.evals.push_back(e);
    r.best_accuracy = std::max(r.best_accuracy, e.accuracy);
    r.final_accuracy = e.accuracy;
  }
}

// Which parameters' gradients held inf/NaN in a step the scaler skipped (the scaler's own
// per-tensor attribution): the first goes to the progress report, all are counted.
void attribute_skipped_step(const amp::GradScaler& scaler, StepReport* report,
                            std::map<std::string, int64_t>& counts) {
  const auto& bad = scaler.last_nonfinite();
  for (const amp::NonFiniteGrad& g : bad) ++counts[g.name];
  if (report && !bad.empty()) {
    report->nonfinite_tensor = bad.front().name;
    report->nonfinite_values = bad.front().count;
    report->nonfinite_tensors = int64_t(bad.size());
  }
}

std::vector<std::pair<std::string, int64_t>> most_first(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

}  // namespace

// 16M examples in one step: far beyond any memory this runs in; larger values are typos or
// overflowed arithmetic in a script.
constexpr int64_t kMaxBatchSize = int64_t(1) << 24;

// More threads than 4x the hardware only adds contention; far more (100,000) made the OpenMP
// runtime crash while creating them.
int max_threads() { return std::max(8, 4 * omp_get_num_procs()); }

Status validate(const TrainConfig& c) {
  auto bad = [](const std::string& flag, const std::string& what) {
    return Status::invalid_argument(flag + ": " + what);
  };
  if (c.epochs < 1) return bad("--epochs", "must be >= 1, got " + std::to_string(c.epochs));
  if (c.max_steps == 0 || c.max_steps < -1)
    return bad("--max-steps", "must be >= 1 (or -1 for no limit), got " + std::to_string(c.max_steps));
  if (c.batch_size < 1 || c.batch_size > kMaxBatchSize)
    return bad("--batch-size", "must be from 1 to " + std::to_string(kMaxBatchSize) + ", got " +
                                   std::to_string(c.batch_size));
  if (!(c.lr > 0) || !std::isfinite(c.lr)) return bad("--lr", "must be a positive number, got " + std::to_string(c.lr));
  if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay))
    return bad("--weight-decay", "must be a finite number >= 0, got " + std::to_string(c.weight_decay));
  // PyTorch's SGD refuses a negative momentum ("Invalid momentum value"); NaN would poison
  // every update silently.
  if (!(c.momentum >= 0) || !std::isfinite(c.momentum))
    return bad("--momentum", "must be a finite number >= 0, got " + std::to_string(c.momentum));
  if (c.optimizer != "adam" && c.optimizer != "adamw" && c.optimizer != "sgd")
    return bad("--optimizer", "expected one of: adam, adamw, sgd; got '" + c.optimizer + "'");
  if (c.threads < 0 || c.threads > max_threads())
    return bad("--threads", "must be from 0 (all cores) to " + std::to_string(max_threads()) +
                                " (4x this machine's " + std::to_string(omp_get_num_procs()) +
                                " hardware threads), got " + std::to_string(c.threads));
  if (auto p = amp::preset_by_name(c.precision); !p.is_ok()) return bad("--precision", p.status().message());
  if (!(c.init_scale > 0) || !std::isfinite(c.init_scale)) return bad("--init-scale", "must be a finite number > 0");
  if (!(c.growth_factor > 1) || !std::isfinite(c.growth_factor)) return bad("--growth-factor", "must be a finite number > 1");
  if (!(c.backoff_factor > 0 && c.backoff_factor < 1)) return bad("--backoff-factor", "must be in (0, 1)");
  if (c.growth_interval < 1) return bad("--growth-interval", "must be >= 1");
  if (c.hysteresis < 1) return bad("--hysteresis", "must be >= 1");
  if (!(c.min_scale >= 0) || !std::isfinite(c.min_scale)) return bad("--min-scale", "must be a finite number >= 0");
  if (!(c.clip_grad_norm >= 0) || !std::isfinite(c.clip_grad_norm))
    return bad("--clip-grad-norm", "must be a finite number >= 0 (0: off)");
  if (c.accumulate < 1) return bad("--accumulate", "must be >= 1, got " + std::to_string(c.accumulate));
  if (c.inject_nonfinite_step < 0) return bad("--inject-nonfinite", "step must be >= 1");
  if (c.save_every < 0) return bad("--save-every", "must be >= 0 (0: after each epoch only)");
  if (c.eval_every < 0) return bad("--eval-every", "must be >= 0 (0: after each epoch only)");
  if ((c.save_every > 0 || !c.resume.empty()) && c.run_dir.empty() && c.resume.empty())
    return bad("--save-every", "needs a run directory (--run-dir)");
  if (!(c.loss_spike_factor == 0 || (c.loss_spike_factor > 1 && std::isfinite(c.loss_spike_factor))))
    return bad("--loss-spike", "must be > 1 (a multiple of the median of the last 50 step losses) or 0 (off), got " +
                                   std::to_string(c.loss_spike_factor));
  if (c.on_divergence != "stop" && c.on_divergence != "rollback")
    return bad("--on-divergence", "expected one of: stop, rollback; got '" + c.on_divergence + "'");
  if (c.on_divergence == "rollback" && c.run_dir.empty() && c.resume.empty())
    return bad("--on-divergence", "rollback restores the last checkpoint, so it needs a run directory (--run-dir)");
  if (c.max_rollbacks < 0) return bad("--max-rollbacks", "must be >= 0");
  if (!c.init_from.empty() && !c.resume.empty())
    return bad("--init-from", "cannot be combined with --resume (--resume restores the weights, optimizer and "
                              "scaler state of the run; --init-from starts a new run from given weights)");
  if (c.overwrite && !c.resume.empty())
    return bad("--overwrite", "cannot be combined with --resume (--resume continues the run in the directory, "
                              "--overwrite deletes it)");
  auto spec = nn::model_spec(c.model);
  if (!spec.is_ok()) return bad("--model", spec.status().message());
  return Status::ok();
}

StatusOr<TrainResult> run(const TrainConfig& config, const Callbacks& cb) {
  MIXPREC_RETURN_IF_ERROR(validate(config));
  // One run per run directory, locked before anything in it is read or written (run_dir.h).
  std::string run_dir_path = run_dir_of(config);
  std::unique_ptr<RunDirLock> run_dir_lock;
  if (!run_dir_path.empty()) {
    auto lock = claim_run_dir(run_dir_path, !config.resume.empty() ? RunDirMode::resume
                                            : config.overwrite     ? RunDirMode::overwrite
                                                                   : RunDirMode::fresh);
    if (!lock.is_ok()) return lock.status();
    run_dir_lock = std::move(lock).value();
  }
  if (config.threads > 0) omp_set_num_threads(config.threads);
  const nn::ModelSpec spec = nn::model_spec(config.model).value();
  auto data = load_data(config, spec);
  if (!data.is_ok()) return data.status();
  const TrainConfig run_config = recorded_config(config, *data);
  DataLoader loader(data->train, {.batch_size = config.batch_size, .shuffle = config.shuffle,
                                  .seed = config.seed});
  TrainResult result;

  amp::Preset preset = amp::preset_by_name(config.precision).value();
  if (config.self_check && preset.name != "fp32") {
    loader.set_epoch(0);
    auto first = loader.next();
    SelfCheckResult check = amp_self_check(preset, spec, config, *first);
    result.self_check = check.summary;
    if (!check.passed) {
      if (cb.on_warning)
        cb.on_warning(check.summary + "; falling back to fp32 (pass --precision fp32 to silence, "
                      "or check MIXPREC_VERBOSE=dispatch)");
      preset = amp::preset_by_name("fp32").value();
    }
  }

  // Same seed, same initial weights in every preset: drawn in f32, then converted.
  manual_seed(config.seed);
  auto model = nn::make_model(spec);
  if (!config.init_from.empty()) {
    // A file that cannot serve as weights is a checkpoint problem (exit code 4 in the CLI).
    if (Status loaded = load_weights(*model, config.init_from); !loaded.is_ok())
      return Status(StatusCode::bad_checkpoint, "--init-from: " + loaded.message());
  }
  if (!config.inject_nonfinite_param.empty()) {
    std::string names;
    bool found = false;
    for (const auto& [name, p] : model->named_parameters()) {
      found = found || name == config.inject_nonfinite_param;
      names += (names.empty() ? "" : ", ") + name;
    }
    if (!found)
      return Status::invalid_argument("--inject-nonfinite: model " + config.model + " has no parameter '" +
                                      config.inject_nonfinite_param + "'; its parameters: " + names);
  }
  PrecisionStep step(preset, model, config);

  // Resume: everything that decides the next step comes back from the checkpoint.
  Position pos;
  // Checkpoints a rollback may return to, oldest first: only finite, resumable ones.
  std::vector<std::string> rollback_candidates;
  if (!config.resume.empty()) {
    // Any problem with the checkpoint is reported as such (exit code 4 in the CLI).
    auto as_checkpoint_error = [](const Status& s) { return Status(StatusCode::bad_checkpoint, s.message()); };
    auto usable = resolve_usable_checkpoint(config.resume);  // skips non-finite ones in a run dir
    if (!usable.is_ok()) return as_checkpoint_error(usable.status());
    const std::string* file = &usable->file;
    if (cb.on_warning && !usable->skipped.empty()) {
      for (const std::string& why : usable->skipped) cb.on_warning("resume: passed over " + why);
      cb.on_warning("resume: continuing from " + *file + " (step " + std::to_string(usable->state.global_step) +
                    "), the newest usable checkpoint");
    }
    rollback_candidates.push_back(*file);
    auto restored = restore_state(step, usable->state, *file);
    if (!restored.is_ok()) return as_checkpoint_error(restored.status());
    pos = *restored;
    result.first_step = pos.global_step + 1;
  }
  std::optional<RunDir> run_dir;
  std::unique_ptr<MetricsLog> metrics;
  if (!run_dir_path.empty()) {
    auto rd = open_run_dir(run_dir_path, config.resume.empty() ? config_to_json(run_config) : "");
    if (!rd.is_ok()) return rd.status();
    run_dir = *rd;
    auto log = MetricsLog::open(run_dir->metrics_path(),
                                config.resume.empty() ? std::optional<int64_t>() : pos.global_step);
    if (!log.is_ok()) return log.status();
    metrics = std::move(log).value();
    result.run_dir = run_dir->path;
  }
  // Metrics "time" stays monotone across resumes: training seconds since the run began.
  const double time_offset = !metrics || config.resume.empty() ? 0.0
                                                              : logged_seconds(run_dir->metrics_path(), pos.global_step);
  // Only a finite, resumable state becomes a checkpoint (save_checked); anything else is
  // reported and never becomes last.json's or a rollback's target.
  auto save = [&](const Position& at, bool is_best) -> Status {
    if (!run_dir) return Status::ok();
    auto saved = save_checked(run_dir->path, capture_state(step, run_config, at), is_best);
    if (!saved.is_ok()) return saved.status();
    if (!saved->usable) {
      if (cb.on_warning) cb.on_warning(saved->problem);
      return Status::ok();
    }
    std::erase(rollback_candidates, saved->file);  // a step saved again after a rollback
    rollback_candidates.push_back(saved->file);
    result.last_checkpoint = saved->file;
    return Status::ok();
  };
  const int64_t per_epoch = loader.num_batches() / config.accumulate;
  if (loader.num_batches() < 1)
    return Status::invalid_argument("--batch-size: " + std::to_string(config.batch_size) +
                                    " is larger than the training set (" + std::to_string(data->train->count) +
                                    " examples)");
  if (per_epoch < 1)
    return Status::invalid_argument("--accumulate: " + std::to_string(config.accumulate) +
                                    " micro-batches per step, but an epoch has only " +
                                    std::to_string(loader.num_batches()) + " batches");
  if (!config.resume.empty() && pos.batch_in_epoch >= per_epoch)
    return Status(StatusCode::bad_checkpoint,
                  "checkpoint '" + rollback_candidates.front() + "': metadata key 'batch_in_epoch': " +
                      std::to_string(pos.batch_in_epoch) + " is past this run's " + std::to_string(per_epoch) +
                      " steps per epoch (expected 0.." + std::to_string(per_epoch - 1) + ")");
  int64_t total = per_epoch * config.epochs;
  if (config.max_steps > 0) total = std::min(total, config.max_steps);
  result.planned_steps = total;
  result.precision = preset.name;
  result.loss_scaling = step.scaler().is_enabled();
  if (!config.resume.empty() && pos.global_step >= total) {  // nothing left to do: say so
    result.last_checkpoint = rollback_candidates.empty() ? std::string() : rollback_candidates.back();
    if (run_dir) describe_finished_run(run_dir->metrics_path(), pos.global_step, result);
    else result.steps = pos.global_step;
    return result;
  }

  if (cb.on_start) {
    cb.on_start(config,
                {{"model", spec.name + " (" + std::to_string(step.model().num_parameters()) + " parameters)"},
                 {"dataset", data->train->name + " (" + std::to_string(data->train->count) + " train, " +
                                 std::to_string(data->test->count) + " test)"},
                 {"steps", std::to_string(total) + " (" + std::to_string(per_epoch) + " per epoch" +
                               (config.accumulate > 1 ? ", " + std::to_string(config.accumulate) +
                                                            " micro-batches each" : "") + ")"},
                 {"threads", std::to_string(omp_get_max_threads())},
                 {"precision", preset.name + " (" + preset.level + ": " + preset.description + ")"},
                 {"loss scaling", preset.loss_scaling ? "dynamic, init " + format_number(config.init_scale) +
                                                           ", interval " + std::to_string(config.growth_interval)
                                                     : "off"},
                 {"self-check", result.self_check.empty() ? "-" : result.self_check}});
  }

  const auto t_start = Clock::now();
  std::vector<double> step_seconds;
  reset_peak_memory();
  int64_t global_step = pos.global_step;
  auto window_start = Clock::now();
  int64_t window_images = 0;
  std::vector<Batch> micro;
  DivergenceGuard guard(config.loss_spike_factor);
  std::map<std::string, int64_t> skipped_by_tensor;
  bool injected = false;
  const bool rollback = config.on_divergence == "rollback";
  if (rollback && rollback_candidates.empty()) {  // a divergence before the first save rolls back to here
    MIXPREC_RETURN_IF_ERROR(save(pos, false));
  }
  auto run_eval = [&](int64_t epoch) -> Status {
    EvalReport e = evaluate(step, data->test, config.batch_size);
    e.epoch = epoch;
    e.step = global_step;
    const bool best = result.evals.empty() || e.accuracy > result.best_accuracy;
    result.evals.push_back(e);
    result.best_accuracy = std::max(result.best_accuracy, e.accuracy);
    result.final_accuracy = e.accuracy;
    if (cb.on_eval) cb.on_eval(e);
    if (metrics) MIXPREC_RETURN_IF_ERROR(metrics->log_eval(global_step, epoch, e.accuracy, e.loss));
    return best ? Status::ok() : Status(StatusCode::ok, "not best");
  };
  // Back to the last good checkpoint: the model, optimizer, scaler, RNG and data position,
  // and the logs forget the steps after it.
  auto roll_back = [&](int64_t epoch, int64_t batch, const std::string& why) -> Status {
    // The newest checkpoint that still loads, is resumable and holds no inf/NaN.
    auto usable = first_usable_checkpoint({rollback_candidates.rbegin(), rollback_candidates.rend()});
    if (!usable.is_ok()) return Status(StatusCode::bad_checkpoint, "rollback: " + usable.status().message());
    const std::string file = usable->file;
    for (const std::string& skipped : usable->skipped)
      if (cb.on_warning) cb.on_warning("rollback: passed over " + skipped);
    while (rollback_candidates.back() != file) rollback_candidates.pop_back();  // the abandoned timeline
    if (run_dir && file != result.last_checkpoint && file.rfind(run_dir->path + "/", 0) == 0) {
      // last.json named one that proved unusable (or none yet): point it at the target.
      MIXPREC_RETURN_IF_ERROR(update_pointer(run_dir->path, "last", file.substr(run_dir->path.size() + 1)));
      result.last_checkpoint = file;
    }
    auto restored = restore_state(step, usable->state, file);
    if (!restored.is_ok()) return Status(StatusCode::bad_checkpoint, "rollback: " + restored.status().message());
    pos = *restored;
    guard.rolled_back(epoch, batch);
    const int64_t kept = std::max<int64_t>(0, pos.global_step - (result.first_step - 1));
    if (int64_t(result.losses.size()) > kept) result.losses.resize(size_t(kept));
    std::erase_if(result.evals, [&](const EvalReport& e) { return e.step > pos.global_step; });
    result.best_accuracy = result.final_accuracy = 0.0;
    for (const EvalReport& e : result.evals) {
      result.best_accuracy = std::max(result.best_accuracy, e.accuracy);
      result.final_accuracy = e.accuracy;
    }
    if (metrics) {
      metrics.reset();  // close before reopening: the reopen truncates the file
      auto log = MetricsLog::open(run_dir->metrics_path(), pos.global_step);
      if (!log.is_ok()) return log.status();
      metrics = std::move(log).value();
    }
    global_step = pos.global_step;
    result.rollbacks = guard.rollbacks();
    if (cb.on_warning)
      cb.on_warning(why + "; rolled back to " + file + " (step " + std::to_string(pos.global_step) +
                    ") and skipping batch " + std::to_string(batch + 1) + " of epoch " + std::to_string(epoch + 1) +
                    " (rollback " + std::to_string(guard.rollbacks()) + " of at most " +
                    std::to_string(config.max_rollbacks) + ")");
    return Status::ok();
  };

  bool restart = true;
  while (restart && !result.diverged) {
    restart = false;
    for (int64_t epoch = pos.epoch; epoch < config.epochs && global_step < total && !restart && !result.diverged;
         ++epoch) {
      const int64_t first_batch = epoch == pos.epoch ? pos.batch_in_epoch : 0;
      MIXPREC_RETURN_IF_ERROR(loader.begin_epoch(epoch, first_batch * config.accumulate));
      for (int64_t i = first_batch; i < per_epoch && global_step < total; ++i) {
        micro.clear();
        for (int64_t k = 0; k < config.accumulate; ++k) micro.push_back(*loader.next());
        const bool skip_batch = guard.skips(epoch, i);  // it diverged before: step over it
        if (!skip_batch) {
          const auto t0 = Clock::now();
          // A one-shot fault, like the hardware or overflow event it models: a rollback
          // replaying this step does not meet it again.
          const bool inject = config.inject_nonfinite_step == global_step + 1 && !injected;
          injected = injected || inject;
          const PrecisionStep::Outcome out = step.run(micro, inject ? &config.inject_nonfinite_param : nullptr);
          if (auto why = guard.check(out.loss, step.scaler().is_enabled())) {
            const std::string where = " at step " + std::to_string(global_step + 1) + " (epoch " +
                                      std::to_string(epoch + 1) + ", batch " + std::to_string(i + 1) +
                                      ", precision " + preset.name + ")";
            if (rollback && guard.rollbacks() < config.max_rollbacks) {
              MIXPREC_RETURN_IF_ERROR(roll_back(epoch, i, "training diverged: " + *why + where));
              restart = true;
              break;
            }
            const std::string msg =
                "training diverged: " + *why + where +
                (rollback ? "; gave up after " + std::to_string(guard.rollbacks()) + " rollbacks" : "") +
                (result.last_checkpoint.empty() ? "" : "; the last good checkpoint is " + result.last_checkpoint) +
                "; try a lower --lr, --clip-grad-norm or a preset with loss scaling";
            if (config.stop_on_divergence) return Status::diverged(msg);
            result.diverged = true;
            result.diverged_at_step = global_step + 1;
            result.losses.push_back(out.loss);
            break;
          }
          step_seconds.push_back(seconds_since(t0));
          ++global_step;
          for (const Batch& b : micro) window_images += b.images.size(0);
          result.losses.push_back(out.loss);
          if (metrics)
            MIXPREC_RETURN_IF_ERROR(metrics->log_step(global_step, epoch, out.loss, step.optimizer().lr(),
                                                      out.scale_used, !out.stepped, time_offset + seconds_since(t_start)));
          if (!out.stepped) attribute_skipped_step(step.scaler(), nullptr, skipped_by_tensor);
          if (cb.on_step) {
            StepReport r;
            r.step = global_step;
            r.total_steps = total;
            r.epoch = epoch;
            r.loss = out.loss;
            r.lr = step.optimizer().lr();
            r.scale = out.scale_used;
            r.skipped = !out.stepped;
            r.skipped_total = step.scaler().skipped_steps();
            const double w = seconds_since(window_start);
            r.images_per_second = w > 0 ? double(window_images) / w : 0.0;
            r.elapsed_seconds = seconds_since(t_start);
            r.loss_scaling = step.scaler().is_enabled();
            if (r.skipped) {
              std::map<std::string, int64_t> ignored;  // counted above
              attribute_skipped_step(step.scaler(), &r, ignored);
            }
            cb.on_step(r);
            if (w > 2.0) {  // a sliding window keeps images/s current
              window_start = Clock::now();
              window_images = 0;
            }
          }
        }
        const Position next{i + 1 == per_epoch ? epoch + 1 : epoch, i + 1 == per_epoch ? 0 : i + 1, global_step};
        const bool end_of_epoch = i + 1 == per_epoch || global_step == total;
        const bool periodic = !skip_batch && global_step > 0;
        bool best = false;
        if (config.evaluate &&
            (end_of_epoch || (periodic && config.eval_every > 0 && global_step % config.eval_every == 0))) {
          Status st = run_eval(epoch);
          if (st.message() != "not best" && !st.is_ok()) return st;
          best = st.message().empty();
        }
        const bool saved = end_of_epoch || (periodic && config.save_every > 0 && global_step % config.save_every == 0);
        if (saved) MIXPREC_RETURN_IF_ERROR(save(next, best));
        if (!skip_batch && cb.stop_requested && cb.stop_requested()) {  // Ctrl-C: stop with a checkpoint
          if (!saved) MIXPREC_RETURN_IF_ERROR(save(next, false));
          result.interrupted = true;
          break;
        }
      }
      if (result.interrupted) break;
    }
    if (result.interrupted) break;
  }
  result.steps = global_step;
  result.seconds = seconds_since(t_start);
  result.seconds_per_step = median(step_seconds);
  result.peak_activation_bytes = peak_bytes(MemoryCategory::activations);
  result.peak_total_bytes = memory_stats().total_peak;
  result.skipped_steps = step.scaler().skipped_steps();
  result.final_scale = step.scaler().get_scale();
  result.precision = preset.name;
  result.skipped_by_tensor = most_first(skipped_by_tensor);
  return result;
}

}  // namespace mixprec::train
