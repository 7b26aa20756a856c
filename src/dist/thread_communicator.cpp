// thread_communicator.cpp: ranks that are threads of one process (distributed.h's
// make_thread_communicators): the data-parallel step of `mpirun -np N` without processes or
// MPI, for workers that each compute on one core and meet a few times per step instead of at
// every OpenMP region's barrier (issue 34: a step beside other processes' busy threads).
//
// Every rank calls the collectives in the same order (as MPI requires), so rank r's k-th call
// meets the others' k-th: a collective is a slot keyed by that sequence number. Each rank posts
// its buffer and goes on; once all have, the ranks that wait for the result share the work
// in chunks (element by element in rank order, each element of every buffer read before any
// is written, so the buffers are updated in place without a copy), and a rank that is not
// waiting yet (a gradient bucket started during backward) keeps computing. Waiting ranks sleep
// on a condition variable (giving their core away, which a busy machine needs), and a rank
// the scheduler has set aside delays nobody: the others take its chunks. Sums are taken in
// rank order, ((d0 + d1) + d2) ..., so two ranks get the same bits as MPI's reduction.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

#include "mixprec/core/half.h"
#include "mixprec/dist/distributed.h"

namespace mixprec::dist {

namespace {

using Clock = std::chrono::steady_clock;

// One collective: what each rank posted, and how far its reduction has come.
struct Slot {
  std::vector<void*> data;       // each rank's buffer (in place), by rank
  std::vector<bool> arrived;     // by rank
  std::vector<uint64_t> values;  // allgather's and agree_on_step's inputs, by rank
  int count = 0, collected = 0;  // ranks arrived; ranks that have taken their result
  // Once every rank has arrived: elements [0, n) to reduce by `range`, handed out in chunks.
  std::function<void(Slot&, size_t, size_t)> range;
  size_t n = 0, next = 0, reduced = 0;
  bool done = false;
};

// Elements per chunk of a reduction: 256 KiB of floats, enough that the lock taken per chunk
// costs nothing, few enough that two waiting ranks share a 1 MiB gradient bucket.
constexpr size_t kChunk = size_t(1) << 16;

// What the ranks share: the slots and their lock.
class Group {
 public:
  explicit Group(int size) : size_(size) {}
  int size() const { return size_; }

  // Posts rank's part of collective `seq`: its buffer (or its value, for allgather) and, from
  // the last rank to arrive, the n elements to reduce with `range`. Does not wait.
  void post(uint64_t seq, int rank, void* data, uint64_t value, size_t n,
            std::function<void(Slot&, size_t, size_t)> range) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Slot& slot = slot_locked(seq);
      slot.data[size_t(rank)] = data;
      slot.values[size_t(rank)] = value;
      slot.arrived[size_t(rank)] = true;
      if (++slot.count < size_) return;
      slot.n = n;
      slot.range = std::move(range);
      slot.done = n == 0;
    }
    cv_.notify_all();  // waiting ranks take the result, or start on the chunks
  }

  bool done(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    return slot_locked(seq).done;
  }

  // Rank `rank` is ending with an error: every wait, now or later, fails naming it.
  void fail(int rank, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_.empty()) failed_ = "worker rank " + std::to_string(rank) + " stopped: " + why;
    }
    cv_.notify_all();
  }

  // Waits until collective `seq` is complete, reducing chunks while any are left, at most
  // `timeout` seconds; then hands the slot to `take` (allgather reads the values) and lets it
  // go once every rank has. A timeout names the ranks that did not arrive.
  Status wait(uint64_t seq, int rank, double timeout, const std::string& what,
              const std::function<void(const Slot&)>& take = {}) {
    std::unique_lock<std::mutex> lock(mu_);
    Slot& slot = slot_locked(seq);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
    const auto work_left = [&] { return slot.count == size_ && slot.next < slot.n && failed_.empty(); };
    while (!slot.done) {
      if (!failed_.empty()) {
        // No chunk is handed out any more; those under way still write into this rank's buffer,
        // which its caller may free once this returns.
        cv_.wait(lock, [&] { return slot.reduced == slot.next; });
        return Status(StatusCode::distributed, "rank " + std::to_string(rank) + ": " + what + ": " + failed_);
      }
      if (work_left()) {
        const size_t b = slot.next, e = std::min(slot.n, b + kChunk);
        slot.next = e;
        lock.unlock();
        slot.range(slot, b, e);  // the buffers belong to ranks that wait for this slot
        lock.lock();
        slot.reduced += e - b;
        if (slot.reduced == slot.n) slot.done = true;
        cv_.notify_all();  // the result, or a failing rank's wait for the chunks under way
        continue;
      }
      if (!cv_.wait_until(lock, deadline, [&] { return slot.done || work_left() || !failed_.empty(); })) {
        std::string missing;
        for (int r = 0; r < size_; ++r)
          if (!slot.arrived[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        if (missing.empty())
          return Status(StatusCode::distributed, "rank " + std::to_string(rank) + ": " + what +
                                                     ": the reduction did not finish within " +
                                                     std::to_string(int(timeout)) + " s");
        return Status(StatusCode::distributed,
                      "rank " + std::to_string(rank) + ": " + what + ": worker rank(s) " + missing +
                          " did not arrive within " + std::to_string(int(timeout)) +
                          " s (they failed, hang, or are stuck in an earlier step; raise --dist-timeout if a step is "
                          "legitimately this slow)");
      }
    }
    if (take) take(slot);
    if (++slot.collected == size_) slots_.erase(seq);
    return Status::ok();
  }

 private:
  Slot& slot_locked(uint64_t seq) {
    auto [it, fresh] = slots_.try_emplace(seq);
    if (fresh) {
      it->second.data.assign(size_t(size_), nullptr);
      it->second.arrived.assign(size_t(size_), false);
      it->second.values.assign(size_t(size_), 0);
    }
    return it->second;
  }

  int size_;
  std::string failed_;  // set by fail(): why every wait fails
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Slot> slots_;
};

// The element-wise reduction of elements [b, e) of every rank's buffer of T's, written back
// to all of them.
template <typename T, typename Op>
void reduce_in_place(Slot& s, size_t b, size_t e, Op op) {
  const size_t ranks = s.data.size();
  for (size_t i = b; i < e; ++i) {
    T acc = static_cast<T*>(s.data[0])[i];
    for (size_t r = 1; r < ranks; ++r) acc = op(acc, static_cast<T*>(s.data[r])[i]);
    for (size_t r = 0; r < ranks; ++r) static_cast<T*>(s.data[r])[i] = acc;
  }
}

// reduce_in_place for sums, in vector registers: the gradients' reduction at the end of every
// step (reduce_in_place's loop over a run-time list of buffers stays scalar, ~3x slower on a
// 4 MiB bucket). The same rank order, ((d0 + d1) + d2) ..., so the same bits.
template <typename T>
void sum_in_place(Slot& s, size_t b, size_t e) {
  const size_t ranks = s.data.size();
  if (ranks == 2) {  // the usual case: one core per worker on a small machine
    T* __restrict x = static_cast<T*>(s.data[0]);
    T* __restrict y = static_cast<T*>(s.data[1]);
#pragma omp simd
    for (size_t i = b; i < e; ++i) {
      const T v = x[i] + y[i];
      x[i] = v;
      y[i] = v;
    }
    return;
  }
  constexpr size_t kBlock = 512;  // the running sums, on the stack: 2-4 KiB
  T acc[kBlock];
  for (size_t at = b; at < e; at += kBlock) {
    const size_t n = std::min(kBlock, e - at);
    const T* first = static_cast<const T*>(s.data[0]) + at;
#pragma omp simd
    for (size_t k = 0; k < n; ++k) acc[k] = first[k];
    for (size_t r = 1; r < ranks; ++r) {
      const T* d = static_cast<const T*>(s.data[r]) + at;
#pragma omp simd
      for (size_t k = 0; k < n; ++k) acc[k] += d[k];
    }
    for (size_t r = 0; r < ranks; ++r) {
      T* d = static_cast<T*>(s.data[r]) + at;
#pragma omp simd
      for (size_t k = 0; k < n; ++k) d[k] = acc[k];
    }
  }
}

class ThreadCommunicator final : public Communicator {
  // A started collective: its slot's sequence number on the shared group.
  class Pending final : public PendingCollective {
   public:
    Pending(ThreadCommunicator& c, uint64_t seq, std::string what) : c_(c), seq_(seq), what_(std::move(what)) {}
    ~Pending() override {
      if (!finished_) (void)wait();  // no rank may be left writing into a buffer that is freed
    }
    bool test() override {
      if (!finished_ && c_.group_->done(seq_)) (void)wait();
      return finished_;
    }
    Status wait() override {
      if (finished_) return Status::ok();
      finished_ = true;
      return c_.group_->wait(seq_, c_.rank_, c_.timeout_seconds_, what_);
    }

   private:
    ThreadCommunicator& c_;
    uint64_t seq_;
    std::string what_;
    bool finished_ = false;
  };

 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string backend() const override { return "threads"; }
  std::string host() const override {
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }

  Status allreduce_sum(std::span<float> data, const std::string& what) override {
    return run(data.data(), data.size(), what, sum_in_place<float>);
  }
  Status allreduce_sum(std::span<double> data, const std::string& what) override {
    return run(data.data(), data.size(), what, sum_in_place<double>);
  }
  StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum(std::span<float> data,
                                                                   const std::string& what) override {
    return start(data.data(), data.size(), what, sum_in_place<float>);
  }
  StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum_bf16(std::span<uint16_t> data,
                                                                        const std::string& what) override {
    // Each pair added in f32 and rounded to bf16 once, as the MPI communicator's reduction.
    return start(data.data(), data.size(), what, [](Slot& s, size_t b, size_t e) {
      reduce_in_place<uint16_t>(s, b, e, [](uint16_t x, uint16_t y) {
        return detail::float_to_bfloat16_bits(detail::bfloat16_bits_to_float(x) + detail::bfloat16_bits_to_float(y));
      });
    });
  }
  Status allreduce_max(std::span<int64_t> data, const std::string& what) override {
    return run(data.data(), data.size(), what, [](Slot& s, size_t b, size_t e) {
      reduce_in_place<int64_t>(s, b, e, [](int64_t x, int64_t y) { return x > y ? x : y; });
    });
  }
  Status broadcast(std::span<uint8_t> data, const std::string& what) override {
    return run(data.data(), data.size(), what, [](Slot& s, size_t b, size_t e) {
      for (size_t r = 1; r < s.data.size(); ++r)
        std::memcpy(static_cast<uint8_t*>(s.data[r]) + b, static_cast<const uint8_t*>(s.data[0]) + b, e - b);
    });
  }
  StatusOr<std::vector<uint64_t>> allgather(uint64_t value, const std::string& what) override {
    std::vector<uint64_t> all;
    const uint64_t seq = next_++;
    group_->post(seq, rank_, nullptr, value, 0, {});
    Status st = group_->wait(seq, rank_, timeout_seconds_, what, [&](const Slot& s) { all = s.values; });
    if (!st.is_ok()) return st;
    return all;
  }
  StatusOr<StepAgreement> agree_on_step(int64_t step, int64_t samples) override {
    const std::string what = "the step rendezvous at step " + std::to_string(step);
    auto steps = allgather(uint64_t(step), what);
    if (!steps.is_ok()) return steps.status();
    std::string behind;
    for (size_t r = 0; r < steps->size(); ++r)
      if (int64_t((*steps)[r]) != step)
        behind += (behind.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " is at step " +
                  std::to_string(int64_t((*steps)[r]));
    if (!behind.empty())
      return Status(StatusCode::distributed, "the worker ranks went out of step: rank " + std::to_string(rank_) +
                                                 " is at step " + std::to_string(step) + ", " + behind);
    auto counts = allgather(uint64_t(samples), what);
    if (!counts.is_ok()) return counts.status();
    StepAgreement a;
    for (uint64_t c : *counts) a.total_samples += int64_t(c);
    return a;
  }
  void stop_peers(const std::string& why) override { group_->fail(rank_, why); }
  [[noreturn]] void abort(int exit_code) override {
    // The other ranks are threads of this process, possibly inside a collective: end them all
    // at once, without running static destructors under their feet.
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(exit_code);
  }

 private:
  using Range = std::function<void(Slot&, size_t, size_t)>;
  Status run(void* data, size_t n, const std::string& what, Range range) {
    const uint64_t seq = next_++;
    group_->post(seq, rank_, data, 0, n, std::move(range));
    return group_->wait(seq, rank_, timeout_seconds_, what);
  }
  StatusOr<std::unique_ptr<PendingCollective>> start(void* data, size_t n, const std::string& what, Range range) {
    const uint64_t seq = next_++;
    group_->post(seq, rank_, data, 0, n, std::move(range));
    return std::unique_ptr<PendingCollective>(std::make_unique<Pending>(*this, seq, what));
  }

  std::shared_ptr<Group> group_;
  int rank_;
  uint64_t next_ = 0;  // this rank's next collective
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int ranks) {
  std::vector<std::unique_ptr<Communicator>> out;
  if (ranks < 1) return out;
  auto group = std::make_shared<Group>(ranks);
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<ThreadCommunicator>(group, r));
  return out;
}

}  // namespace mixprec::dist
