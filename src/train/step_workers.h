// step_workers.h: a training step as W workers, threads of this process that are the ranks of
// a data-parallel step (make_thread_communicators): each steps its own replica of the model on
// its shard of the batch with its own OpenMP threads (one by default), and they meet at the
// data-parallel step's few collectives (the rendezvous, the gradient buckets, the loss, the
// scaler's flag) instead of at the barrier ending each of a step's ~200 OpenMP regions.
//
// Why (issue 34): beside other processes' busy threads, the scheduler sets one of a step's
// threads aside for a time slice now and then, and every barrier it misses stalls the step;
// a worker that computes alone loses nothing until the next meeting. Measured on 2 cores
// beside 2 and 4 busy loops (docs/benchmarks.md, "Shared machines"), this keeps a step within
// its fair share where OpenMP's threads do not.
//
// The arithmetic is `mpirun -np W mixprec train`'s (docs/distributed.md): gradients averaged
// over the ranks, BatchNorm statistics per shard and buffers from rank 0; a worker's random
// draws (dropout) come from its own generator, a copy of the process's at the start, as every
// mpirun rank starts from the same seed.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mixprec/amp/precision.h"
#include "mixprec/data/data.h"
#include "mixprec/dist/distributed.h"
#include "mixprec/nn/models.h"
#include "mixprec/train/step_benchmark.h"

namespace mixprec::train {

class StepWorkers {
 public:
  // `workers` replicas of the spec's model under `preset` (the same weights: each built after
  // manual_seed(seed)), worker w stepping on rows [w n / W, (w + 1) n / W) of `batch` (n its
  // rows, which must divide evenly) with `threads_per_worker` OpenMP threads. The calling
  // thread is worker 0; the others start here and wait for run(). sync_bn: BatchNorm
  // statistics over the whole batch (BenchmarkStep::join_ranks).
  StepWorkers(const nn::ModelSpec& spec, const amp::Preset& preset, const Batch& batch, int workers,
              int threads_per_worker, uint64_t seed, bool sync_bn = false);
  ~StepWorkers();  // stops and joins the worker threads
  StepWorkers(const StepWorkers&) = delete;
  StepWorkers& operator=(const StepWorkers&) = delete;

  // One step on every worker; returns worker 0's phases with the loss averaged over all.
  // Rethrows a worker's failure (and a collective that timed out waiting for it).
  BenchmarkStep::Phases run();
  nn::Module& model();  // worker 0's replica
  int workers() const { return int(replicas_.size()); }

 private:
  void worker_loop(int w);
  void rethrow_failure();

  std::vector<std::unique_ptr<dist::Communicator>> comms_;
  std::vector<std::unique_ptr<BenchmarkStep>> replicas_;
  std::vector<Batch> shards_;
  int threads_per_worker_ = 1;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t target_ = 0;  // steps every worker is to have run
  bool stop_ = false;
  std::exception_ptr failure_;
};

}  // namespace mixprec::train
