// mpi_communicator.cpp: the Communicator over OpenMPI's MPI_COMM_WORLD (distributed.h).
//
// Large collectives are blocking MPI calls, which progress fastest, guarded by a Watchdog that
// ends the process if one outlives --dist-timeout; gradient buckets are non-blocking
// (MPI_Iallreduce), started during backward and waited for under the same watchdog. The step rendezvous
// (agree_on_step) is made of small point-to-point messages polled with MPI_Test instead, so
// that rank 0 can say *which* rank is missing, and the others that rank 0 is.
#include "dist/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstdio>

#include "dist/watchdog.h"
#include "mixprec/core/half.h"

namespace mixprec::dist {

namespace {

// MPI reduction of bf16 bits (MPI has no bf16 type): each pair is added in f32 and the sum
// rounded to bf16 once, as the CPU's own conversion rounds (nearest even).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = detail::float_to_bfloat16_bits(detail::bfloat16_bits_to_float(a[i]) + detail::bfloat16_bits_to_float(b[i]));
}

// One or more MPI_Iallreduce requests (a buffer beyond INT_MAX elements takes several).
class MpiPending final : public PendingCollective {
 public:
  MpiPending(std::vector<MPI_Request> requests, std::string what, Watchdog& dog, double timeout)
      : requests_(std::move(requests)), what_(std::move(what)), dog_(dog), timeout_(timeout) {}
  ~MpiPending() override {
    if (!done_) (void)wait();  // MPI must not be left holding a buffer that is freed
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_Testall(int(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
    done_ = flag != 0;
    return done_;
  }
  Status wait() override {
    if (done_) return Status::ok();
    Watchdog::Watch watch(dog_, what_, timeout_);
    const int rc = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    done_ = true;
    if (rc != MPI_SUCCESS) return Status(StatusCode::distributed, what_ + " failed in MPI");
    return Status::ok();
  }

 private:
  std::vector<MPI_Request> requests_;
  std::string what_;
  Watchdog& dog_;
  double timeout_;
  bool done_ = false;
};

constexpr int kExitDistributed = 7;  // docs/cli.md's exit code for a distributed failure
constexpr int kTagArrive = 7301, kTagAnswer = 7302;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_.assign(name, size_t(std::max(0, len)));
    watchdog_ = std::make_unique<Watchdog>(who(rank_), kExitDistributed);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  std::string host() const override { return host_; }

  Status allreduce_sum(std::span<float> data, const std::string& what) override {
    return allreduce(data.data(), int64_t(data.size()), MPI_FLOAT, MPI_SUM, what);
  }
  Status allreduce_sum(std::span<double> data, const std::string& what) override {
    return allreduce(data.data(), int64_t(data.size()), MPI_DOUBLE, MPI_SUM, what);
  }
  StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum(std::span<float> data,
                                                                   const std::string& what) override {
    return start(data.data(), int64_t(data.size()), MPI_FLOAT, MPI_SUM, what);
  }
  StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum_bf16(std::span<uint16_t> data,
                                                                        const std::string& what) override {
    if (bf16_sum_ == MPI_OP_NULL) MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_);
    return start(data.data(), int64_t(data.size()), MPI_UINT16_T, bf16_sum_, what);
  }
  Status allreduce_max(std::span<int64_t> data, const std::string& what) override {
    return allreduce(data.data(), int64_t(data.size()), MPI_INT64_T, MPI_MAX, what);
  }

  Status broadcast(std::span<uint8_t> data, const std::string& what) override {
    Watchdog::Watch watch(*watchdog_, what, timeout_seconds_);
    for (size_t at = 0; at < data.size(); at += size_t(INT_MAX)) {
      const int n = int(std::min<size_t>(data.size() - at, size_t(INT_MAX)));
      if (MPI_Bcast(data.data() + at, n, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return failed(what);
    }
    return Status::ok();
  }

  StatusOr<std::vector<uint64_t>> allgather(uint64_t value, const std::string& what) override {
    std::vector<uint64_t> all(size_t(size_), 0);
    Watchdog::Watch watch(*watchdog_, what, timeout_seconds_);
    if (MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD) != MPI_SUCCESS)
      return failed(what);
    return all;
  }

  StatusOr<StepAgreement> agree_on_step(int64_t step, int64_t samples) override {
    return rank_ == 0 ? agree_as_root(step, samples) : agree_as_member(step, samples);
  }

  [[noreturn]] void abort(int exit_code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    _exit(exit_code);  // MPI_Abort does not return; this only tells the compiler so
  }

 private:
  std::string who(int r) const {
    return "rank " + std::to_string(r) + (r == rank_ && !host_.empty() ? " (" + host_ + ")" : "");
  }
  Status failed(const std::string& what) const {
    return Status(StatusCode::distributed, who(rank_) + ": " + what + " failed in MPI");
  }

  Status allreduce(void* data, int64_t count, MPI_Datatype type, MPI_Op op, const std::string& what) {
    Watchdog::Watch watch(*watchdog_, what, timeout_seconds_);
    int elem = 0;
    MPI_Type_size(type, &elem);
    auto* bytes = static_cast<char*>(data);
    for (int64_t at = 0; at < count; at += INT_MAX) {
      const int n = int(std::min<int64_t>(count - at, INT_MAX));
      if (MPI_Allreduce(MPI_IN_PLACE, bytes + at * elem, n, type, op, MPI_COMM_WORLD) != MPI_SUCCESS)
        return failed(what);
    }
    return Status::ok();
  }

  StatusOr<std::unique_ptr<PendingCollective>> start(void* data, int64_t count, MPI_Datatype type, MPI_Op op,
                                                      const std::string& what) {
    int elem = 0;
    MPI_Type_size(type, &elem);
    auto* bytes = static_cast<char*>(data);
    std::vector<MPI_Request> requests;
    for (int64_t at = 0; at < count; at += INT_MAX) {
      const int n = int(std::min<int64_t>(count - at, INT_MAX));
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Iallreduce(MPI_IN_PLACE, bytes + at * elem, n, type, op, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
        return failed(what);
      requests.push_back(r);
    }
    return std::unique_ptr<PendingCollective>(
        std::make_unique<MpiPending>(std::move(requests), who(rank_) + ": " + what, *watchdog_, timeout_seconds_));
  }

  // Polls `requests` until all complete or the timeout passes; returns which completed.
  std::vector<bool> poll(std::vector<MPI_Request>& requests) const {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
    std::vector<bool> done(requests.size(), false);
    const auto start = Clock::now();
    for (;;) {
      bool all = true;
      for (size_t i = 0; i < requests.size(); ++i) {
        if (done[i]) continue;
        int flag = 0;
        MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
        done[i] = flag != 0;
        all = all && done[i];
      }
      const auto now = Clock::now();
      if (all || now >= deadline) return done;
      // For the first 2 ms (a rank that is just behind: the usual case, every step) poll
      // while yielding, which gives the core to any other runnable thread on it and otherwise
      // returns at once; a sleep here cost each step its granularity (~0.1 ms of a ~10 ms
      // step, twice). Then sleep lightly: a rank that is far behind needs no fast answer.
      if (now - start < std::chrono::milliseconds(2))
        sched_yield();
      else
        usleep(now - start < std::chrono::milliseconds(200) ? 50 : 500);
    }
  }

  StatusOr<StepAgreement> agree_as_root(int64_t step, int64_t samples) {
    std::vector<int64_t> got(size_t(2 * size_), 0);
    std::vector<MPI_Request> recv(size_t(size_ - 1));
    for (int r = 1; r < size_; ++r)
      MPI_Irecv(&got[size_t(2 * r)], 2, MPI_INT64_T, r, kTagArrive, MPI_COMM_WORLD, &recv[size_t(r - 1)]);
    const std::vector<bool> arrived = poll(recv);
    std::string missing;
    for (int r = 1; r < size_; ++r)
      if (!arrived[size_t(r - 1)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    if (!missing.empty())
      return Status(StatusCode::distributed,
                    "rank(s) " + missing + " did not reach step " + std::to_string(step) + " within " +
                        std::to_string(int(timeout_seconds_)) + " s (rank 0 on " + host_ +
                        " waited): they died, hang, or are stuck in an earlier step; raise --dist-timeout "
                        "if a step is legitimately this slow");
    StepAgreement a{samples};
    std::string behind;
    for (int r = 1; r < size_; ++r) {
      const int64_t* m = &got[size_t(2 * r)];
      if (m[0] != step)
        behind += (behind.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " is at step " +
                  std::to_string(m[0]);
      a.total_samples += m[1];
    }
    const int64_t answer[2] = {a.total_samples, behind.empty() ? 0 : 1};
    std::vector<MPI_Request> send(size_t(size_ - 1));
    for (int r = 1; r < size_; ++r)
      MPI_Isend(answer, 2, MPI_INT64_T, r, kTagAnswer, MPI_COMM_WORLD, &send[size_t(r - 1)]);
    const std::vector<bool> sent = poll(send);
    if (!behind.empty())
      return Status(StatusCode::distributed, "the ranks went out of step: rank 0 is at step " + std::to_string(step) +
                                                 ", " + behind);
    if (std::find(sent.begin(), sent.end(), false) != sent.end())
      return Status(StatusCode::distributed, "rank 0 (" + host_ + "): a rank stopped receiving at step " +
                                                 std::to_string(step));
    return a;
  }

  StatusOr<StepAgreement> agree_as_member(int64_t step, int64_t samples) {
    const int64_t mine[2] = {step, samples};
    int64_t answer[2] = {0, 0};
    std::vector<MPI_Request> req(2);
    MPI_Isend(mine, 2, MPI_INT64_T, 0, kTagArrive, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(answer, 2, MPI_INT64_T, 0, kTagAnswer, MPI_COMM_WORLD, &req[1]);
    const std::vector<bool> done = poll(req);
    if (!done[0] || !done[1])
      return Status(StatusCode::distributed,
                    who(rank_) + ": rank 0 did not answer at step " + std::to_string(step) + " within " +
                        std::to_string(int(timeout_seconds_)) +
                        " s: rank 0 died, hangs, or is stuck in an earlier step; raise --dist-timeout if a step "
                        "(or rank 0's checkpoint) is legitimately this slow");
    if (answer[1] != 0)
      return Status(StatusCode::distributed,
                    who(rank_) + ": the ranks went out of step at step " + std::to_string(step) + " (see rank 0)");
    return StepAgreement{answer[0]};
  }

  int rank_ = 0, size_ = 1;
  std::string host_;
  std::unique_ptr<Watchdog> watchdog_;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> make_mpi_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Ranks on one machine exchange gradients through OpenMPI's shared-memory transport
    // (vader). Its default single-copy mechanism for large messages, Linux CMA, pins the
    // peer's pages on every transfer; with buffers reused every step, copying through the
    // shared segment is faster: seed-cnn amp-bf16 on 2 ranks 12.0-12.1 -> 10.7-10.9 ms per
    // step, cnn 12.5-12.7 -> 11.8-12.3, the GPTs unchanged (AMD EPYC Zen5, 2026-11-26). A
    // user's own setting (mpirun -x / --mca) wins: overwrite = 0.
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
    // The gradient buckets are MPI_Iallreduce calls in place, for which OpenMPI's libnbc
    // always takes its binomial schedule (as for fewer than 4 ranks): every buffer is summed
    // on rank 0 while the others wait, then sent back whole. Reduce-scatter + all-gather
    // (Rabenseifner's: each rank sums 1/N of the buffer, log N steps each way; libnbc's own
    // choice for large commutative reductions that are not in place) took seed-cnn's 2-rank
    // step from 9.1 to 8.35 ms in amp-bf16 and 14.1 to 13.7 ms in fp32 (the ring: 8.7, 13.7;
    // AMD EPYC Zen5, 2026-11-26, bench/dp_scaling.sh). Each element is still summed once and
    // the sum sent to every rank, so the ranks stay bit-identical; the small collectives
    // (losses, flags) are blocking MPI_Allreduce calls, untouched. A user's setting wins.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return Status(StatusCode::distributed, "MPI_Init_thread failed: is this process started by mpirun?");
  }
  // Errors come back as codes (not MPI's default abort), so that they are reported as ours.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>());
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace mixprec::dist
