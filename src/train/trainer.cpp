// trainer.cpp: the training loop of a TrainingRun (training_run.h). Per optimizer step:
// `accumulate` micro-batches through PrecisionStep (autocast, scaler, masters); evaluation and
// checkpoints after each epoch (and every --eval-every / --save-every steps); progress through
// callbacks. A DivergenceGuard watches each loss: on divergence the run stops (the last good
// checkpoint untouched) or, with on_divergence = rollback, restarts from that checkpoint and
// steps over the offending batch.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "mixprec/autograd/autograd.h"
#include "mixprec/core/memory.h"
#include "mixprec/ops/ops.h"
#include "train/training_run.h"

namespace mixprec::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What an evaluation adds up: a data-parallel run sums these over the ranks' shards.
struct EvalSums {
  int64_t correct = 0, samples = 0;
  double loss_sum = 0.0;
  bool next_byte = false;
};

EvalSums evaluate(PrecisionStep& step, const std::shared_ptr<const ImageDataset>& test, int64_t batch_size) {
  step.model().eval();
  DataLoader loader(test, {.batch_size = batch_size, .shuffle = false, .prefetch = 1});
  EvalSums r;
  while (auto batch = loader.next()) {
    Tensor logits = step.predict(batch->images);
    NoGradGuard ng;
    r.loss_sum += classification_loss(logits, batch->labels, Reduction::sum).item();
    // Every position of a sequence is one prediction (a language model's next byte).
    if (logits.dim() > 2) {
      r.next_byte = true;
      logits = reshape(logits, {logits.numel() / logits.size(-1), logits.size(-1)});
    }
    const Tensor pred = argmax(logits);
    const int64_t* p = pred.data_ptr<int64_t>();
    const int64_t* y = batch->labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < pred.numel(); ++i) r.correct += p[i] == y[i];
    r.samples += pred.numel();
  }
  step.model().train();
  return r;
}

EvalReport report_of(const EvalSums& s) {
  EvalReport r;
  r.samples = s.samples;
  r.next_byte = s.next_byte;
  r.accuracy = s.samples ? double(s.correct) / double(s.samples) : 0.0;
  r.loss = s.samples ? s.loss_sum / double(s.samples) : 0.0;
  return r;
}

// Which parameters' gradients held inf/NaN in a step the scaler skipped (the scaler's own
// per-tensor attribution): the first goes to the progress report, all are counted.
void attribute_skipped_step(const amp::GradScaler& scaler, StepReport* report,
                            std::map<std::string, int64_t>* counts) {
  const auto& bad = scaler.last_nonfinite();
  if (counts)
    for (const amp::NonFiniteGrad& g : bad) ++(*counts)[g.name];
  if (report && !bad.empty()) {
    report->nonfinite_tensor = bad.front().name;
    report->nonfinite_values = bad.front().count;
    report->nonfinite_tensors = int64_t(bad.size());
  }
}

}  // namespace

Status TrainingRun::save(const Position& at, bool is_best) {
  if (!run_dir_) return Status::ok();
  auto saved = save_checked(run_dir_->path, capture_state(*step_, recorded_config_, at), is_best);
  if (!saved.is_ok()) return saved.status();
  if (!saved->usable) {
    if (cb_.on_warning) cb_.on_warning(saved->problem);
    return Status::ok();
  }
  std::erase(rollback_candidates_, saved->file);  // a step saved again after a rollback
  rollback_candidates_.push_back(saved->file);
  result_.last_checkpoint = saved->file;
  auto removed = prune_checkpoints(run_dir_->path, config_.keep_checkpoints);
  if (!removed.is_ok()) return removed.status();
  for (const std::string& gone : *removed) std::erase(rollback_candidates_, gone);
  return Status::ok();
}

StatusOr<bool> TrainingRun::evaluate_now(int64_t epoch) {
  const auto t0 = Clock::now();
  EvalSums sums;
  if (dp_ && dp_->ranks() > 1) {
    // Each rank evaluates its contiguous share of the test set (the same weights everywhere:
    // the replicas are checked) and the sums are added over the ranks, so every rank gets
    // the whole test set's figures for 1/N of the work.
    if (!eval_shard_) {
      const int64_t n = data_.test->count, r = dp_->rank(), k = dp_->ranks();
      eval_shard_ = std::make_shared<ImageDataset>(data_.test->slice(n * r / k, n * (r + 1) / k));
    }
    sums = evaluate(*step_, eval_shard_, config_.batch_size);
    double v[4] = {double(sums.correct), double(sums.samples), sums.loss_sum, sums.next_byte ? 1.0 : 0.0};
    MIXPREC_RETURN_IF_ERROR(dp_->sum_over_ranks(v, "the evaluation sums at step " + std::to_string(global_step_)));
    sums = {int64_t(v[0]), int64_t(v[1]), v[2], v[3] > 0};
  } else {
    sums = evaluate(*step_, data_.test, config_.batch_size);
  }
  EvalReport e = report_of(sums);
  const double eval_seconds = seconds_since(t0);
  e.epoch = epoch;
  e.step = global_step_;
  const bool best = result_.evals.empty() || e.accuracy > result_.best_accuracy;
  result_.evals.push_back(e);
  result_.best_accuracy = std::max(result_.best_accuracy, e.accuracy);
  result_.final_accuracy = e.accuracy;
  if (cb_.on_eval) cb_.on_eval(e);
  if (metrics_) MIXPREC_RETURN_IF_ERROR(metrics_->log_eval(global_step_, epoch, e.accuracy, e.loss, eval_seconds));
  return best;
}

Status TrainingRun::roll_back(int64_t epoch, int64_t batch, const std::string& why) {
  // The newest checkpoint that still loads, is resumable and holds no inf/NaN. In a
  // data-parallel run the ranks decided alike (the guard reads the all-reduced loss); rank 0,
  // which wrote the checkpoints, picks one and every rank restores that file (the run
  // directory is shared, as for --resume).
  const bool picks = !dp_ || dp_->rank() == 0;
  StatusOr<UsableCheckpoint> usable = Status::internal("rollback: no checkpoint chosen");
  if (picks) usable = first_usable_checkpoint({rollback_candidates_.rbegin(), rollback_candidates_.rend()});
  if (dp_) {
    auto chosen = dp_->broadcast_text(usable.is_ok() ? usable->file : std::string(),
                                      "the rollback checkpoint at step " + std::to_string(global_step_));
    if (!chosen.is_ok()) return chosen.status();
    if (chosen->empty() && !picks)
      return Status(StatusCode::bad_checkpoint, "rollback: rank 0 found no usable checkpoint (its message says why)");
    if (!picks) usable = first_usable_checkpoint({*chosen});
  }
  if (!usable.is_ok()) return Status(StatusCode::bad_checkpoint, "rollback: " + usable.status().message());
  const std::string file = usable->file;
  for (const std::string& skipped : usable->skipped)
    if (cb_.on_warning) cb_.on_warning("rollback: passed over " + skipped);
  // The abandoned timeline (rank 0's list; another rank's holds at most its resume file).
  while (!rollback_candidates_.empty() && rollback_candidates_.back() != file) rollback_candidates_.pop_back();
  if (rollback_candidates_.empty()) rollback_candidates_.push_back(file);
  if (run_dir_ && file != result_.last_checkpoint && file.rfind(run_dir_->path + "/", 0) == 0) {
    // last.json named one that proved unusable (or none yet): point it at the target.
    MIXPREC_RETURN_IF_ERROR(update_pointer(run_dir_->path, "last", file.substr(run_dir_->path.size() + 1)));
    result_.last_checkpoint = file;
  }
  auto restored = restore_state(*step_, usable->state, file);
  if (!restored.is_ok()) return Status(StatusCode::bad_checkpoint, "rollback: " + restored.status().message());
  pos_ = *restored;
  guard_.rolled_back(epoch, batch);
  const int64_t kept = std::max<int64_t>(0, pos_.global_step - (result_.first_step - 1));
  if (int64_t(result_.losses.size()) > kept) result_.losses.resize(size_t(kept));
  std::erase_if(result_.evals, [&](const EvalReport& e) { return e.step > pos_.global_step; });
  result_.best_accuracy = result_.final_accuracy = 0.0;
  for (const EvalReport& e : result_.evals) {
    result_.best_accuracy = std::max(result_.best_accuracy, e.accuracy);
    result_.final_accuracy = e.accuracy;
  }
  if (metrics_) {
    metrics_.reset();  // close before reopening: the reopen truncates the file
    auto log = MetricsLog::open(run_dir_->metrics_path(), pos_.global_step);
    if (!log.is_ok()) return log.status();
    metrics_ = std::move(log).value();
  }
  global_step_ = pos_.global_step;
  result_.rollbacks = guard_.rollbacks();
  if (cb_.on_warning)
    cb_.on_warning(why + "; rolled back to " + file + " (step " + std::to_string(pos_.global_step) +
                   ") and skipping batch " + std::to_string(batch + 1) + " of epoch " + std::to_string(epoch + 1) +
                   " (rollback " + std::to_string(guard_.rollbacks()) + " of at most " +
                   std::to_string(config_.max_rollbacks) + ")");
  return Status::ok();
}

void TrainingRun::report_step(int64_t epoch, const PrecisionStep::Outcome& out) {
  if (!cb_.on_step) return;
  StepReport r;
  r.step = global_step_;
  r.total_steps = total_;
  r.epoch = epoch;
  r.loss = out.loss;
  r.lr = step_->optimizer().lr();
  r.scale = out.scale_used;
  r.skipped = !out.stepped;
  r.skipped_total = step_->scaler().skipped_steps();
  const double w = seconds_since(window_start_);
  r.images_per_second = w > 0 ? double(window_images_) / w : 0.0;
  // Each window of a language model predicts its context's worth of bytes.
  if (data_.train->text) r.tokens_per_second = r.images_per_second * double(data_.train->sample_bytes() - 1);
  r.elapsed_seconds = seconds_since(t_start_);
  r.loss_scaling = step_->scaler().is_enabled();
  if (r.skipped) attribute_skipped_step(step_->scaler(), &r, nullptr);
  cb_.on_step(r);
  if (w > 2.0) {  // a sliding window keeps images/s current
    window_start_ = Clock::now();
    window_images_ = 0;
  }
}

StatusOr<TrainingRun::Next> TrainingRun::train_step(int64_t epoch, int64_t batch) {
  const auto t0 = Clock::now();
  // A one-shot fault, like the hardware or overflow event it models: a rollback replaying this
  // step does not meet it again.
  const bool inject = config_.inject_nonfinite_step == global_step_ + 1 && !injected_;
  // The schedule advances only on applied steps: skipped ones (the scaler's count, which the
  // checkpoint keeps, so a resume agrees) do not move it.
  step_->optimizer().set_lr(lr_at(config_, global_step_ - step_->scaler().skipped_steps() + 1, total_));
  injected_ = injected_ || inject;
  int64_t samples = 0;  // this step's, over all ranks
  for (const Batch& b : micro_) samples += b.images.size(0);
  if (dp_) {  // the rendezvous: all ranks at this step, and their share of its samples
    auto weight = dp_->agree_on_step(global_step_ + 1, samples);
    if (!weight.is_ok()) return weight.status();
    step_->set_step_weight(*weight, global_step_ + 1);
    samples = int64_t(std::llround(double(samples) * dp_->ranks() / *weight));
  }
  // Gradient-underflow telemetry at logged steps 1, N+1, ...: a read pass over the gradients.
  if (metrics_ && config_.underflow_every > 0 && global_step_ % config_.underflow_every == 0 &&
      step_->counts_underflow())
    step_->count_underflow_next_step();
  const PrecisionStep::Outcome out = step_->run(micro_, inject ? &config_.inject_nonfinite_param : nullptr);
  if (dp_ && !step_->model().named_buffers().empty())
    MIXPREC_RETURN_IF_ERROR(dp_->sync_buffers(step_->model(), global_step_ + 1));
  if (dp_) result_.communication_seconds += 1e-3 * dp_->take_communication_ms();
  if (auto why = guard_.check(out.loss, step_->scaler().is_enabled())) {
    const std::string where = " at step " + std::to_string(global_step_ + 1) + " (epoch " + std::to_string(epoch + 1) +
                              ", batch " + std::to_string(batch + 1) + ", precision " + preset_.name + ")";
    const bool rollback = config_.on_divergence == "rollback";
    if (rollback && guard_.rollbacks() < config_.max_rollbacks) {
      MIXPREC_RETURN_IF_ERROR(roll_back(epoch, batch, "training diverged: " + *why + where));
      return Next::restart_from_checkpoint;
    }
    const std::string msg =
        "training diverged: " + *why + where +
        (rollback ? "; gave up after " + std::to_string(guard_.rollbacks()) + " rollbacks" : "") +
        (result_.last_checkpoint.empty() ? "" : "; the last good checkpoint is " + result_.last_checkpoint) +
        "; try a lower --lr, --clip-grad-norm or a preset with loss scaling";
    if (config_.stop_on_divergence) return Status::diverged(msg);
    result_.diverged = true;
    result_.diverged_at_step = global_step_ + 1;
    result_.losses.push_back(out.loss);
    return Next::stop;
  }
  step_seconds_.push_back(seconds_since(t0));
  ++global_step_;
  window_images_ += samples;
  result_.losses.push_back(out.loss);
  if (metrics_) {
    MetricsLog::StepExtras extras;
    const MemoryStats mem = memory_stats();
    extras.memory_bytes = mem.total_current;
    extras.peak_memory_bytes = mem.total_peak;
    if (!out.stepped) {
      const auto& bad = step_->scaler().last_nonfinite();
      extras.overflow_tensors = int64_t(bad.size());
      for (size_t i = 0; i < bad.size() && i < MetricsLog::kMaxOverflowNames; ++i)
        extras.overflow.emplace_back(bad[i].name, bad[i].count);
    }
    extras.underflow = out.underflow;
    extras.ranks = dp_ ? dp_->ranks() : 1;
    MIXPREC_RETURN_IF_ERROR(metrics_->log_step(global_step_, epoch, out.loss, step_->optimizer().lr(), out.scale_used,
                                               !out.stepped, time_offset_ + seconds_since(t_start_), extras));
  }
  if (!out.stepped) attribute_skipped_step(step_->scaler(), nullptr, &skipped_by_tensor_);
  report_step(epoch, out);
  return Next::go_on;
}

StatusOr<TrainingRun::Next> TrainingRun::after_step(int64_t epoch, int64_t batch, bool skipped_batch) {
  const bool last_of_epoch = batch + 1 == per_epoch_;
  const Position next{last_of_epoch ? epoch + 1 : epoch, last_of_epoch ? 0 : batch + 1, global_step_};
  const bool end_of_epoch = last_of_epoch || global_step_ == total_;
  const bool periodic = !skipped_batch && global_step_ > 0;
  bool best = false;
  if (config_.evaluate &&
      (end_of_epoch || (periodic && config_.eval_every > 0 && global_step_ % config_.eval_every == 0))) {
    auto evaluated = evaluate_now(epoch);
    if (!evaluated.is_ok()) return evaluated.status();
    best = *evaluated;
  }
  const bool saved = end_of_epoch || (periodic && config_.save_every > 0 && global_step_ % config_.save_every == 0);
  if (saved) MIXPREC_RETURN_IF_ERROR(save(next, best));
  if (dp_ && !skipped_batch && config_.dist_check_every > 0 && global_step_ % config_.dist_check_every == 0)
    MIXPREC_RETURN_IF_ERROR(
        dp_->check_replicas(step_->optimizer().params(), step_->scaler().get_scale(), global_step_));
  bool stop = !skipped_batch && cb_.stop_requested && cb_.stop_requested();
  if (dp_ && !skipped_batch) {  // Ctrl-C on any rank (mpirun forwards it to all) stops all at the same step
    auto any = dp_->any(stop, "the stop check after step " + std::to_string(global_step_));
    if (!any.is_ok()) return any.status();
    stop = *any;
  }
  if (stop) {  // Ctrl-C: stop with a checkpoint
    if (!saved) MIXPREC_RETURN_IF_ERROR(save(next, false));
    result_.interrupted = true;
    return Next::stop;
  }
  return Next::go_on;
}

Status TrainingRun::train() {
  t_start_ = window_start_ = Clock::now();
  reset_peak_memory();
  global_step_ = pos_.global_step;
  if (config_.on_divergence == "rollback" && rollback_candidates_.empty())
    MIXPREC_RETURN_IF_ERROR(save(pos_, false));  // a divergence before the first save rolls back to here
  // Each pass starts at pos_; a rollback moves pos_ back and starts a new pass from there.
  for (;;) {
    Next next = Next::go_on;
    for (int64_t epoch = pos_.epoch; epoch < config_.epochs && global_step_ < total_ && next == Next::go_on;
         ++epoch) {
      const int64_t first_batch = epoch == pos_.epoch ? pos_.batch_in_epoch : 0;
      MIXPREC_RETURN_IF_ERROR(loader_->begin_epoch(epoch, first_batch * config_.accumulate));
      for (int64_t i = first_batch; i < per_epoch_ && global_step_ < total_ && next == Next::go_on; ++i) {
        micro_.clear();
        for (int64_t k = 0; k < config_.accumulate; ++k) micro_.push_back(*loader_->next());
        const bool skip_batch = guard_.skips(epoch, i);  // it diverged before: step over it
        if (!skip_batch) {
          auto stepped = train_step(epoch, i);
          if (!stepped.is_ok()) return stepped.status();
          next = *stepped;
          if (next != Next::go_on) break;
        }
        auto after = after_step(epoch, i, skip_batch);
        if (!after.is_ok()) return after.status();
        next = *after;
      }
    }
    if (next != Next::restart_from_checkpoint) {
      if (!dp_) return Status::ok();
      return dp_->check_replicas(step_->optimizer().params(), step_->scaler().get_scale(), global_step_);
    }
  }
}

}  // namespace mixprec::train
