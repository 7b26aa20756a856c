// distributed.h: the processes a data-parallel training run is spread over.
//
// `mpirun -np N mixprec train ...` starts N processes (ranks); each trains on its shard of
// every batch and the ranks average their gradients before each optimizer step
// (docs/distributed.md). A Communicator is what a rank asks of the others. Three exist:
// "local" (one process: every collective is the identity), "mpi" (OpenMPI, when mixprec
// was built with it and the process was started by mpirun) and "threads" (ranks that are
// threads of one process: make_thread_communicators). The MPI calls live in
// src/dist/mpi_communicator.cpp alone.
//
// Every collective is bounded in time: it waits at most `timeout_seconds` (set_timeout) for
// the other ranks and then fails with StatusCode::distributed naming what it waited for, so
// a rank that died or hangs ends the job instead of stalling it. Collectives must be called
// by every rank in the same order, as MPI's are.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::dist {

// What the ranks agree on before a training step: checked and combined on rank 0.
struct StepAgreement {
  int64_t total_samples = 0;  // the samples of this step over all ranks
};

// A collective running in the background while this rank computes (a gradient bucket
// reduced during backward). test() lets it progress (MPI moves a non-blocking collective on
// only inside MPI calls) and says whether it is done; wait() blocks until it is, at most the
// communicator's timeout, and then fails naming what it waited for.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual bool test() = 0;
  virtual Status wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "local", "mpi" or "threads"
  // The host this rank runs on (messages name the rank and its host).
  virtual std::string host() const = 0;

  void set_timeout(double seconds) { timeout_seconds_ = seconds; }
  double timeout() const { return timeout_seconds_; }

  // data := the element-wise sum over ranks (float or double), in place. `what` names the
  // collective in a timeout message ("gradient all-reduce at step 12").
  virtual Status allreduce_sum(std::span<float> data, const std::string& what) = 0;
  virtual Status allreduce_sum(std::span<double> data, const std::string& what) = 0;
  // Start data := the element-wise sum over ranks without waiting for it; `data` must stay
  // untouched until the returned collective completes. Every rank must start the same
  // collectives in the same order.
  virtual StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum(std::span<float> data,
                                                                           const std::string& what) = 0;
  // The same over bfloat16 values (their bits): each step of the reduction adds two partial
  // sums in f32 and rounds the result to bf16 once, so the wire carries half the bytes of f32.
  virtual StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum_bf16(std::span<uint16_t> data,
                                                                                const std::string& what) = 0;
  // data := the element-wise maximum over ranks.
  virtual Status allreduce_max(std::span<int64_t> data, const std::string& what) = 0;
  // data := rank 0's bytes, on every rank.
  virtual Status broadcast(std::span<uint8_t> data, const std::string& what) = 0;
  // Every rank's value, in rank order.
  virtual StatusOr<std::vector<uint64_t>> allgather(uint64_t value, const std::string& what) = 0;
  // The step rendezvous: every rank reports (step, samples); rank 0 checks that all are at
  // the same step and answers with the total. A rank missing after the timeout is named (by
  // rank 0; rank 0 itself by the others).
  virtual StatusOr<StepAgreement> agree_on_step(int64_t step, int64_t samples) = 0;
  // This rank is ending with `why` (an error): the other ranks' collectives fail at once,
  // naming it, instead of waiting out the timeout. Threads only: an MPI job's ranks are ended
  // by abort(), and one process has no others.
  virtual void stop_peers(const std::string& why) { (void)why; }
  // Ends every rank of the job now (after an error one rank cannot recover from alone):
  // MPI_Abort under mpirun, exit(code) in one process. Does not return.
  [[noreturn]] virtual void abort(int exit_code) = 0;

 protected:
  double timeout_seconds_ = 60.0;
};

// The communicator of this process, made on first use: "mpi" when mixprec was built with
// MPI and mpirun started this process (OMPI_COMM_WORLD_SIZE or PMIX_RANK in the
// environment), else "local". Built without MPI but started by mpirun with more than one
// rank: init_world() returns an error saying so (each process would train alone).
Status init_world();
Communicator& world();
// Finalizes MPI, if it was initialized (the CLI calls it before a clean exit).
void finalize_world();
// True when this build can run data-parallel across processes.
bool mpi_available();

// A communicator of size 1 (tests, and the fallback of world()).
std::unique_ptr<Communicator> make_local_communicator();

// `ranks` communicators (rank 0 .. ranks - 1) for ranks that are threads of this process, one
// communicator per thread: the collectives of `mpirun -np ranks` with the same results (sums
// in rank order: for two ranks the same bits as MPI's), over shared memory. A waiting rank
// sleeps instead of spinning, and a collective that waits past the timeout names the ranks
// that did not arrive. abort() ends the whole process. Empty for ranks < 1.
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int ranks);

}  // namespace mixprec::dist
