// step_workers.cpp: a training step as in-process data-parallel workers (step_workers.h).
#include "train/step_workers.h"

#include <omp.h>

#include "core/random.h"
#include "mixprec/core/threads.h"
#include "mixprec/ops/ops.h"

namespace mixprec::train {

StepWorkers::StepWorkers(const nn::ModelSpec& spec, const amp::Preset& preset, const Batch& batch, int workers,
                         int threads_per_worker, uint64_t seed, bool sync_bn)
    : threads_per_worker_(threads_per_worker < 1 ? 1 : threads_per_worker) {
  const int64_t n = batch.images.size(0);
  if (workers < 1 || n % workers != 0)
    throw Error(Status::invalid_argument("--workers " + std::to_string(workers) + " must divide the batch of " +
                                         std::to_string(n)));
  const int64_t part = n / workers;
  comms_ = dist::make_thread_communicators(workers);
  for (int w = 0; w < workers; ++w) {
    replicas_.push_back(std::make_unique<BenchmarkStep>(spec, preset, part, seed));
    replicas_.back()->join_ranks(*comms_[size_t(w)], sync_bn);
    shards_.push_back(Batch{narrow(batch.images, w * part, part), narrow(batch.labels, w * part, part)});
  }
  // Each replica was built after manual_seed(seed): the process generator now holds the state
  // every mpirun rank would hold here, and each worker thread starts from a copy of it.
  const std::mt19937_64 start = global_generator();
  for (int w = 1; w < workers; ++w)
    threads_.emplace_back([this, w, start] {
      ThreadGenerator own(start);
      WorkerScope worker(w);  // its own cached kernels (primitive_cache.h)
      omp_set_num_threads(threads_per_worker_);  // this thread's ICV only
      worker_loop(w);
    });
}

StepWorkers::~StepWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void StepWorkers::worker_loop(int w) {
  int64_t done = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || target_ > done; });
      if (stop_) return;
    }
    try {
      replicas_[size_t(w)]->run(shards_[size_t(w)]);
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failure_) failure_ = std::current_exception();
      }
      comms_[size_t(w)]->stop_peers(e.what());  // the others' collectives fail now, not at the timeout
    }
    ++done;
  }
}

void StepWorkers::rethrow_failure() {
  std::exception_ptr f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f = failure_;
  }
  if (f) std::rethrow_exception(f);
}

BenchmarkStep::Phases StepWorkers::run() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++target_;
  }
  cv_.notify_all();
  // Worker 0 is the calling thread: its OpenMP count is the workers', for this step only. The
  // others are not waited for here: they finish with the step's last collective, and the next
  // step's rendezvous meets them (a worker set aside by the scheduler just after it costs
  // nothing until then).
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads_per_worker_);
  BenchmarkStep::Phases p;
  try {
    p = replicas_[0]->run(shards_[0]);
  } catch (const std::exception& e) {
    omp_set_num_threads(saved);
    comms_[0]->stop_peers(e.what());  // so that the destructor's join does not wait for a timeout
    rethrow_failure();                // the cause, where another worker failed first
    throw;
  }
  omp_set_num_threads(saved);
  rethrow_failure();
  return p;
}

nn::Module& StepWorkers::model() { return replicas_[0]->model(); }

}  // namespace mixprec::train
