// training_run_ranks.cpp: the data-parallel part of setting a training run up
// (training_run.h): joining the ranks of an mpirun job with the run's reduction settings, and
// checking at the start that every rank runs the same settings, program, data and weights.
#include <algorithm>

#include "mixprec/dist/distributed.h"
#include "mixprec/train/train_config.h"
#include "train/training_run.h"

namespace mixprec::train {

Status TrainingRun::join_ranks() {
  dist::Communicator& comm = ranks_ ? *ranks_ : dist::world();
  if (ranks_ && dist::world().size() > 1)
    return Status::invalid_argument("--workers " + std::to_string(config_.workers) + " inside an mpirun job of " +
                                    std::to_string(dist::world().size()) +
                                    " ranks: use one or the other (mpirun -np N, or --workers N in one process)");
  comm.set_timeout(config_.dist_timeout);
  if (comm.size() == 1) {
    // Settings of the ranks' collectives: said once, when a new run asks for them alone.
    if (cb_.on_warning && config_.resume.empty() && (config_.sync_bn || config_.allreduce_dtype != "f32"))
      cb_.on_warning(std::string(config_.sync_bn ? "--sync-bn" : "--allreduce-dtype") +
                     " has no effect in one process: it is for data-parallel runs (mpirun -np N mixprec train ...)");
    return Status::ok();
  }
  const int n = comm.size();
  if (!ranks_ && config_.batch_size % n != 0)  // --workers': validate()'s
    return Status::invalid_argument("--batch-size: " + std::to_string(config_.batch_size) +
                                    " is the global batch and must divide evenly over " + std::to_string(n) +
                                    " ranks (try " + even_batches_near(config_.batch_size, n) + ")");
  ReducerOptions reducer;
  reducer.bucket_bytes = int64_t(config_.bucket_mb * double(1 << 20));
  reducer.first_bucket_bytes = std::min(reducer.first_bucket_bytes, reducer.bucket_bytes);
  reducer.wire = config_.allreduce_dtype == "bf16" ? WireDType::bf16 : WireDType::f32;
  dp_ = std::make_unique<DataParallel>(comm, reducer);
  return Status::ok();
}

Status TrainingRun::check_ranks_agree() {
  if (!dp_) return Status::ok();
  // The settings that shape the run (config.json's), not the run-time knobs (threads, fault
  // injection, timeouts): ranks of one job may differ in those.
  TrainConfig shape = recorded_config_;
  shape.threads = 0;
  MIXPREC_RETURN_IF_ERROR(dp_->check_same_text("training configuration", config_to_json(shape), "at the start"));
  MIXPREC_RETURN_IF_ERROR(dp_->check_same({{"mixprec executable", hash_executable()},
                                           {"training data", hash_dataset(*data_.train)},
                                           {"test data", hash_dataset(*data_.test)}},
                                          "at the start"));
  return dp_->check_replicas(step_->optimizer().params(), step_->scaler().get_scale(), pos_.global_step);
}

}  // namespace mixprec::train
