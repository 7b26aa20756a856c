// training_run_threads.cpp: what a training run computes on (training_run.h): its thread
// count (mixprec/core/threads.h's adaptive policy, --threads, OMP_NUM_THREADS, the cgroup
// quota), decided once and recorded, and the workers the default chooses on a busy machine.
#include <omp.h>

#include <cstdlib>

#include "mixprec/core/threads.h"
#include "mixprec/dist/distributed.h"
#include "mixprec/train/train_config.h"
#include "train/training_run.h"

namespace mixprec::train {

WorkerChoice default_workers(const TrainConfig& config) {
  // Only where the thread count would be adaptive too: --threads, OMP_NUM_THREADS, a resume
  // (its recorded count) and an mpirun rank keep what they say; an invalid configuration is
  // refused by the run itself.
  ThreadPolicy policy(config.threads, 0.5, ThreadPolicy::Sampler{}, 0, cpu_quota());
  if (!policy.adaptive() || !config.resume.empty() || !validate(config, true).is_ok() || dist::world().size() > 1)
    return {};
  policy.settle();
  return choose_workers(policy, config.batch_size);
}

void TrainingRun::start_threads() {
  // With neither --threads nor OMP_NUM_THREADS a new run of one process measures the other
  // processes over its set-up and keeps one count for the whole run, recorded in config.json
  // so that a resume continues on it: the thread count changes some kernels' summation order
  // (mixprec/core/threads.h), and a run must stay reproducible. A resume, or a rank of a
  // data-parallel run, without the flag keeps OpenMP's default as before, within the cgroup's
  // CPU quota (mixprec/core/cpu_quota.h). An explicit count wins over the quota, with a warning.
  const CpuQuota quota = cpu_quota();
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  else if (config_.workers > 1) {  // each worker computes alone unless --threads says otherwise
    omp_set_num_threads(1);
    threads_note_ = " per worker (" + std::to_string(config_.workers) + " workers" +
                    (workers_chosen_.empty() ? ")"
                                             : ", chosen because " + workers_chosen_ +
                                                   "; --workers 1 trains as one step on adaptive threads)");
  }
  else if (config_.resume.empty() && !(dp_ && dp_->ranks() > 1))
    adaptive_ = std::make_unique<ThreadPolicy>(0, 0.5, ThreadPolicy::Sampler{}, 0, quota);
  else if (!std::getenv("OMP_NUM_THREADS") && quota.limited() && omp_get_max_threads() > quota.threads()) {
    omp_set_num_threads(quota.threads());
    threads_note_ = ": OpenMP's default, cgroup CPU quota " + quota.cores_text();
  }
  if (config_.threads > 0 || std::getenv("OMP_NUM_THREADS")) {
    const std::string setting = config_.threads <= 0 ? "OMP_NUM_THREADS=" + std::string(std::getenv("OMP_NUM_THREADS"))
                                : config_.resume.empty() ? "--threads " + std::to_string(config_.threads)
                                                         : "threads " + std::to_string(config_.threads) + " (the run's, or --threads)";
    if (const std::string w = thread_quota_warning(omp_get_max_threads(), setting, quota); !w.empty()) {
      threads_note_ = " (more than the cgroup CPU quota of " + quota.cores_text() + ")";
      if (cb_.on_warning) cb_.on_warning(w);
    }
  }
}

void TrainingRun::settle_threads() {
  if (adaptive_ && adaptive_->adaptive()) {
    recorded_config_.threads = adaptive_->settle();
    // "1: adaptive (now 1 of 2: other processes busy on ~1.6 cores), kept for the run ..."
    threads_note_ = ": " + adaptive_->describe() + ", kept for this run and its resumes";
    // One thread on cores that others keep busy: workers would keep a fair share (the default
    // chooses them when it can, train::run; it could not, or --workers 1 was given).
    const WorkerChoice w = choose_workers(*adaptive_, config_.batch_size);
    if (w.workers > 1)
      threads_note_ += "; --workers " + std::to_string(w.workers) +
                       " would keep this run's share of the busy cores (docs/distributed.md)";
    else if (!w.obstacle.empty())
      threads_note_ += "; workers would keep this run's share of the busy cores, but " + w.obstacle +
                       " (docs/distributed.md)";
  }
}

}  // namespace mixprec::train
