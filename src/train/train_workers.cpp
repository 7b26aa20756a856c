// train_workers.cpp: `mixprec train --workers N` (training_run.h's run_workers): the run as N
// threads of this process, each a TrainingRun that is one rank of a data-parallel run over
// make_thread_communicators, as `mpirun -np N mixprec train` runs it across processes (the
// same sharded batches, averaged gradients, BatchNorm buffers from rank 0, rank 0 writing the
// run directory), without MPI. Why threads that meet a few times per step rather than OpenMP
// threads that meet at every parallel region: train/step_workers.h.
#include <omp.h>

#include <atomic>
#include <thread>

#include "core/random.h"
#include "mixprec/core/threads.h"
#include "mixprec/dist/distributed.h"
#include "train/training_run.h"

namespace mixprec::train {

StatusOr<TrainResult> run_workers(const TrainConfig& config, const Callbacks& callbacks, const std::string& chosen) {
  const int n = config.workers;
  auto comms = dist::make_thread_communicators(n);
  for (auto& c : comms) c->set_timeout(config.dist_timeout);
  // Every rank seeds its generator as an mpirun rank would (build_model's manual_seed): the
  // others start from a copy of the process generator and seed their own.
  const std::mt19937_64 start = global_generator();
  // The other ranks report through rank 0 (the run's table, steps and warnings are rank 0's;
  // their own failures come back as their results) and stop when the caller asks rank 0 to:
  // the ranks agree on stopping after every step.
  Callbacks others;
  others.stop_requested = callbacks.stop_requested;
  std::vector<StatusOr<TrainResult>> results;
  for (int r = 0; r < n; ++r) results.emplace_back(Status::internal("worker rank " + std::to_string(r) + " did not run"));
  std::atomic<int> first_failure{-1};
  const auto run_rank = [&](int r) {
    WorkerScope worker(r);  // its own cached kernels (backend/onednn/primitive_cache.h)
    try {
      TrainingRun training(config, r == 0 ? callbacks : others, nullptr, comms[size_t(r)].get());
      training.set_workers_chosen(chosen);
      results[size_t(r)] = training.run();
    } catch (const Error& e) {
      results[size_t(r)] = e.status();
    } catch (const std::bad_alloc&) {
      results[size_t(r)] = Status::resource_exhausted("worker rank " + std::to_string(r) + " ran out of memory");
    }
    if (results[size_t(r)].is_ok()) return;
    int none = -1;  // the first rank to fail is the cause: the others fail because it stopped them
    first_failure.compare_exchange_strong(none, r);
    comms[size_t(r)]->stop_peers(results[size_t(r)].status().message());
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadGenerator own(start);
      run_rank(r);
    });
  const int caller_threads = omp_get_max_threads();
  run_rank(0);
  omp_set_num_threads(caller_threads);
  for (std::thread& t : threads) t.join();
  if (first_failure >= 0) return results[size_t(first_failure.load())].status();
  return std::move(results[0]);
}

}  // namespace mixprec::train
