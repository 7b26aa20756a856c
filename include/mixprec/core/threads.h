// threads.h: the thread count a command computes with when the user chose none (neither
// --threads nor OMP_NUM_THREADS): all the cores this process may use, less the cores other
// processes keep busy (at least 1), measured from /proc/stat, and never more than its
// cgroup's CPU quota lets run at once (cpu_quota.h: a container's --cpus, a Kubernetes limit).
//
// Why: every OpenMP parallel region waits at its end for its slowest thread. Beside other
// busy processes on the same cores, one of a step's threads is often set aside by the
// scheduler for a whole time slice while the others spin or sleep at the barrier, and a
// step of many short regions collapses (issue 34: gpt-tiny's amp-bf16 step 31.5 ms quiet,
// 2988 ms beside 4 busy threads on 2 cores with 2 threads, 122 ms with 1). Computing on the
// cores nobody else wants keeps each region's threads running together.
//
// Reproducibility: some kernels (oneDNN's convolution weight gradients, a fused conv kernel's
// per-thread partial sums) sum in an order that depends on the thread count, so a training
// run's losses differ between thread counts. `train` therefore decides once, before its
// first step, and records the count in config.json (a resume continues with it); the
// inference commands and `bench`, whose forward passes do not depend on it (measured), keep
// re-deciding (docs/cli.md, Environment).
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/core/cpu_quota.h"

namespace mixprec {

// One reading of the CPU accounting.
struct CpuSample {
  bool valid = false;
  double busy = 0;   // seconds the cores this process may use were busy (every process's work)
  double total = 0;  // busy + idle seconds of those cores (time stolen by a hypervisor left out)
  double own = 0;    // this process's CPU seconds, all its threads
  double wall = 0;   // a steady clock, seconds
};

// /proc/stat's text to busy and total seconds (busy and total only; own and wall are the
// caller's): the sums of the `cpuN` lines whose N is in `cores` (every cpuN line when empty),
// at `ticks_per_second` (USER_HZ). Invalid when a core of `cores` has no line, a line is
// malformed, or there is no cpuN line at all.
CpuSample parse_proc_stat(std::string_view text, const std::vector<int>& cores, double ticks_per_second);

struct ThreadChoice {
  int threads = 1;
  bool measured = false;    // false: the samples told nothing usable, and threads = cores
  double others_busy = 0;   // cores that other processes kept busy between the samples
};

// The thread count for `cores` usable cores from two samples, pure: others' busy cores are
// the busy share of the cores' time times `cores`, less this process's CPU per wall second;
// the count is cores - others, rounded, within 1..cores, and at most `cap` (a CPU quota's
// CpuQuota::threads(); 0: no cap). `current` (0: none yet) is kept unless the new target is
// at least 0.6 away from it, so that a load near a rounding boundary does not switch the count
// every sample. Invalid samples, a clock that did not advance or a non-finite figure: all
// cores (at most `cap`), measured = false.
ThreadChoice choose_threads(const CpuSample& before, const CpuSample& after, int cores, int current = 0,
                            int cap = 0);

// "" when `threads` fits `quota`, else a warning that `setting` ("--threads 4",
// "OMP_NUM_THREADS=4") starts more threads than the quota lets run at once. An explicit
// count wins over the quota (the user may know better, and a training run's count is part of
// its reproducibility), so this is only said.
std::string thread_quota_warning(int threads, const std::string& setting, const CpuQuota& quota);

// The in-process worker the calling thread computes for (bench --workers: each worker is a
// rank of a data-parallel step, train/step_workers.h), 0 on every other thread. The oneDNN
// backend keys its cached kernels by it: a cached kernel holds per-call state behind a lock,
// and workers running the same shapes at once would otherwise take turns.
int current_worker();
// Makes the calling thread worker `worker` until the scope ends.
class WorkerScope {
 public:
  explicit WorkerScope(int worker);
  ~WorkerScope();
  WorkerScope(const WorkerScope&) = delete;
  WorkerScope& operator=(const WorkerScope&) = delete;

 private:
  int previous_;
};

// The cores this process may run on (its affinity mask), in increasing order.
std::vector<int> usable_cores();

// Reads `proc_stat` for `cores`, this process's CPU time (CLOCK_PROCESS_CPUTIME_ID) and the
// steady clock. Invalid when the file cannot be read or parsed.
CpuSample read_cpu_sample(const std::vector<int>& cores, const std::string& proc_stat = "/proc/stat");

// The thread policy of one command. With --threads N (threads_flag > 0) or OMP_NUM_THREADS
// set, it applies that and never measures (quota_warning() says when that exceeds the CPU
// quota); otherwise it is adaptive, within the quota.
// MIXPREC_THREADS_OTHERS_BUSY=CORES replaces the measurement by that figure (tests, and a
// user who wants to see what the policy does beside a given load).
// Thread-safe: serve's model thread and HTTP workers share one.
class ThreadPolicy {
 public:
  using Sampler = std::function<CpuSample()>;
  // sampler: empty for read_cpu_sample on this process's cores; tests pass their own.
  // interval: seconds between two measurements. quota: empty for cpu_quota() (this
  // process's cgroup, or MIXPREC_CGROUP_ROOT's fake tree); tests pass their own.
  explicit ThreadPolicy(int threads_flag, double interval = 0.5, Sampler sampler = {}, int cores = 0,
                        std::optional<CpuQuota> quota = std::nullopt);

  bool adaptive() const { return adaptive_; }
  // The most threads the adaptive count may reach: the usable cores, or fewer when the CPU
  // quota lets fewer run at once.
  int available() const { return available_; }
  const CpuQuota& quota() const { return quota_; }
  // "" or, when --threads or OMP_NUM_THREADS asks for more threads than the CPU quota lets
  // run at once, a warning for the command to print (thread_quota_warning).
  std::string quota_warning() const;
  // Sets the calling thread's OpenMP thread count (the ICV is per thread) to the policy's:
  // the flag's, OMP_NUM_THREADS's (untouched), or the adaptive count, re-decided when
  // `interval` seconds have passed since the last measurement; until the first decision,
  // available(). Between measurements it costs a clock read. Returns the count.
  int apply();
  // The first decision now, waiting for the rest of `window` seconds since the policy was
  // made if less has passed (a command that decides once: train, eval, predict, generate);
  // then applies it as apply() does. Returns the count.
  int settle(double window = 0.2);
  int threads() const;
  // The last decision's figures (ThreadChoice::others_busy: the cores other processes kept busy).
  ThreadChoice choice() const;
  // "adaptive (now 1 of 2: other processes busy on ~1.6 cores)", "2 (--threads)",
  // "OMP_NUM_THREADS=3", "adaptive (2 of 2 until measured)"; with a quota that binds,
  // "adaptive (now 2 of 8: cgroup CPU quota 1.5 cores; other processes busy on ~0.2 cores)"
  // and "4 (--threads; more than the cgroup CPU quota of 1.5 cores)".
  std::string describe() const;

 private:
  void decide_locked(const CpuSample& now);
  std::string quota_excess() const;  // "more than the cgroup CPU quota of 1.5 cores" or ""
  int explicit_threads() const;      // --threads's or OMP_NUM_THREADS's count
  bool adaptive_ = false;
  CpuQuota quota_;
  int flag_ = 0, cores_ = 1, available_ = 1, threads_ = 1;
  double interval_ = 0.5, assumed_others_ = -1, last_real_ = 0;  // last_real_: the steady clock at the last sample
  std::string assumed_problem_, omp_env_;  // omp_env_: OMP_NUM_THREADS as the policy found it
  Sampler sampler_;
  CpuSample last_;
  ThreadChoice choice_;
  bool decided_ = false;
  mutable std::mutex mutex_;
};

// The workers a command that can run its step as in-process data-parallel workers (train and
// bench: train/step_workers.h) takes when the user chose neither --workers nor a thread count:
// `settled` is that command's adaptive policy after its first decision (settle()). When
// other processes keep all but at most half a core busy (the adaptive count came out at 1 of
// 2 or more usable cores: no core is left to compute on alone), one worker per usable core:
// each computes alone and they meet a few times per step, where OpenMP threads meet at each
// of a step's ~200 parallel regions and a thread the scheduler sets aside holds up every one
// of them (docs/benchmarks.md, "Shared machines"). A count of 2 or more computes on cores the
// others leave free and needs none (workers would repeat the optimizer's memory passes in
// every replica). Otherwise 1 (WorkerChoice says why when the load asked for workers). Not on
// machines of more than kMaxAutoWorkers usable cores (a replica per core costs memory and
// splits the batch finely: --workers N asks for them there), and not when `batch` does not
// divide over the workers. The choice changes a run's arithmetic as mpirun -np N does
// (averaged gradients, a dropout generator per worker): train records it in config.json.
constexpr int kMaxAutoWorkers = 8;
struct WorkerChoice {
  int workers = 1;
  // Why workers were worth it: "other processes busy on ~1.9 of 2 cores"; empty when the cores
  // are free or the policy is not adaptive.
  std::string load;
  // Why one worker though they were: "the batch of 33 does not divide over 2 workers".
  std::string obstacle;
};
WorkerChoice choose_workers(const ThreadPolicy& settled, int64_t batch);

}  // namespace mixprec
