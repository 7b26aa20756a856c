// threads_test.cpp: the adaptive thread count (mixprec/core/threads.h) on synthetic /proc/stat
// texts and synthetic samples: nothing here reads the real machine's load or the clock's pace.
#include <gtest/gtest.h>

#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "mixprec/core/threads.h"

namespace mixprec {
namespace {

// Two cores, USER_HZ 100: cpu0 busy 100+0+50+0+0 = 150 ticks of 150+850 = 1000; cpu1 busy
// 300 of 1000 (its steal, 70, left out of both).
const char* kStat =
    "cpu  450 0 150 1700 0 0 0 70 0 0\n"
    "cpu0 100 0 50 850 0 0 0 0 0 0\n"
    "cpu1 200 0 100 600 100 0 0 70 0 0\n"
    "intr 12345 1 2 3\n"
    "ctxt 999\n"
    "procs_running 3\n";

TEST(ParseProcStat, SumsTheCoresAsked) {
  const CpuSample s = parse_proc_stat(kStat, {0, 1}, 100.0);
  ASSERT_TRUE(s.valid);
  EXPECT_DOUBLE_EQ(s.busy, 4.5);
  EXPECT_DOUBLE_EQ(s.total, 20.0);
  const CpuSample one = parse_proc_stat(kStat, {1}, 100.0);
  ASSERT_TRUE(one.valid);
  EXPECT_DOUBLE_EQ(one.busy, 3.0);
  EXPECT_DOUBLE_EQ(one.total, 10.0);
  const CpuSample all = parse_proc_stat(kStat, {}, 100.0);  // every cpuN line, not the aggregate
  EXPECT_TRUE(all.valid);
  EXPECT_DOUBLE_EQ(all.total, 20.0);
}

TEST(ParseProcStat, OlderKernelsFourFields) {
  const CpuSample s = parse_proc_stat("cpu 1 2 3 4\ncpu0 10 0 10 80\n", {0}, 100.0);
  ASSERT_TRUE(s.valid);
  EXPECT_DOUBLE_EQ(s.busy, 0.2);
  EXPECT_DOUBLE_EQ(s.total, 1.0);
}

TEST(ParseProcStat, GarbageIsInvalid) {
  EXPECT_FALSE(parse_proc_stat("", {0}, 100.0).valid);
  EXPECT_FALSE(parse_proc_stat("hello world\n", {}, 100.0).valid);
  EXPECT_FALSE(parse_proc_stat(kStat, {0, 7}, 100.0).valid);                     // a core without a line
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 x 4\n", {0}, 100.0).valid);            // not a number
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3\n", {0}, 100.0).valid);              // too few fields
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4\ncpu0 1 2 3 4\n", {0}, 100.0).valid);  // a core twice
  EXPECT_FALSE(parse_proc_stat("cpu0 -1 2 3 4\n", {0}, 100.0).valid);           // negative
  EXPECT_FALSE(parse_proc_stat("cpu0 99999999999999999999999 2 3 4\n", {0}, 100.0).valid);  // overflow
  EXPECT_FALSE(parse_proc_stat(kStat, {0}, 0.0).valid);                         // no tick rate
}

CpuSample sample(double busy, double total, double own, double wall) { return CpuSample{true, busy, total, own, wall}; }

TEST(ChooseThreads, QuietMachineTakesAllCores) {
  // 1 s on 2 cores, both busy, all of it this process's: nobody else.
  const ThreadChoice c = choose_threads(sample(0, 0, 0, 0), sample(2.0, 2.0, 2.0, 1.0), 2);
  EXPECT_TRUE(c.measured);
  EXPECT_EQ(c.threads, 2);
  EXPECT_NEAR(c.others_busy, 0.0, 1e-12);
  // Idle and this process idle too (a command between requests): still all cores.
  EXPECT_EQ(choose_threads(sample(0, 0, 0, 0), sample(0.1, 2.0, 0.05, 1.0), 2).threads, 2);
}

TEST(ChooseThreads, OthersBusyOnKCoresLeaveCoresMinusK) {
  // 8 cores all busy for 1 s; this process used 5 CPU-s: others on 3 cores.
  ThreadChoice c = choose_threads(sample(0, 0, 0, 0), sample(8.0, 8.0, 5.0, 1.0), 8);
  EXPECT_EQ(c.threads, 5);
  EXPECT_NEAR(c.others_busy, 3.0, 1e-12);
  // 2 cores, others on ~1.6 of them (this process 0.4 CPU-s a second): 1 thread.
  c = choose_threads(sample(0, 0, 0, 0), sample(2.0, 2.0, 0.4, 1.0), 2);
  EXPECT_EQ(c.threads, 1);
  EXPECT_NEAR(c.others_busy, 1.6, 1e-12);
  // Others on every core and more: never below 1.
  EXPECT_EQ(choose_threads(sample(0, 0, 0, 0), sample(4.0, 4.0, 0.0, 1.0), 4).threads, 1);
  // The busy share times the cores, whatever the tick totals (a 2 s window).
  EXPECT_EQ(choose_threads(sample(10, 20, 1, 5), sample(13.0, 24.0, 2.0, 7.0), 2).threads, 1);  // 1.5 busy - 0.5 own
}

TEST(ChooseThreads, KeepsTheCurrentCountNearARoundingBoundary) {
  // Target 2 - 0.55 = 1.45: rounds to 1 from scratch, but 2 is kept (0.55 < 0.6 away).
  const CpuSample a = sample(0, 0, 0, 0), b = sample(2.0, 2.0, 1.45, 1.0);
  EXPECT_EQ(choose_threads(a, b, 2).threads, 1);
  EXPECT_EQ(choose_threads(a, b, 2, 2).threads, 2);
  EXPECT_EQ(choose_threads(a, b, 2, 1).threads, 1);
  // Far enough away, the count changes.
  EXPECT_EQ(choose_threads(a, sample(2.0, 2.0, 1.3, 1.0), 2, 2).threads, 1);  // target 1.3
  EXPECT_EQ(choose_threads(a, sample(1.0, 2.0, 1.0, 1.0), 2, 1).threads, 2);  // target 2
}

TEST(ChooseThreads, UnusableSamplesKeepTheDefault) {
  const CpuSample good = sample(1, 2, 0, 1);
  for (const ThreadChoice& c :
       {choose_threads(CpuSample{}, good, 4), choose_threads(good, CpuSample{}, 4),
        choose_threads(good, good, 4),                               // no time passed
        choose_threads(sample(5, 10, 0, 1), sample(4, 12, 0, 2), 4),  // counters going back
        choose_threads(good, sample(2, 3, -1, 2), 4),                 // own CPU going back
        choose_threads(good, sample(std::nan(""), 3, 0, 2), 4)}) {
    EXPECT_FALSE(c.measured);
    EXPECT_EQ(c.threads, 4);
  }
  EXPECT_EQ(choose_threads(good, sample(2, 3, 0, 2), 0).threads, 1);  // no cores given: 1
}

TEST(ChooseThreads, TheQuotaCapsTheCount) {
  const CpuSample a = sample(0, 0, 0, 0);
  // A quiet 4-core machine, a quota of 2 threads (--cpus=1.5): 2, not 4.
  ThreadChoice c = choose_threads(a, sample(0.1, 4.0, 0.05, 1.0), 4, 0, 2);
  EXPECT_TRUE(c.measured);
  EXPECT_EQ(c.threads, 2);
  // Others busy on 3 of the 4 cores: the load is the tighter limit.
  EXPECT_EQ(choose_threads(a, sample(4.0, 4.0, 1.0, 1.0), 4, 0, 2).threads, 1);
  // A current count above the cap is not kept by the hysteresis.
  EXPECT_EQ(choose_threads(a, sample(0.1, 4.0, 0.05, 1.0), 4, 3, 2).threads, 2);
  // Target min(4 - 1.45, 2) = 2: within 0.6 of the current 2, kept; no cap: 3 (2.55 rounds up).
  EXPECT_EQ(choose_threads(a, sample(4.0, 4.0, 2.55, 1.0), 4, 2, 2).threads, 2);
  EXPECT_EQ(choose_threads(a, sample(4.0, 4.0, 2.55, 1.0), 4, 0, 0).threads, 3);
  // A cap of 0 or above the cores changes nothing; unusable samples give the cap.
  EXPECT_EQ(choose_threads(a, sample(0.1, 4.0, 0.05, 1.0), 4, 0, 0).threads, 4);
  EXPECT_EQ(choose_threads(a, sample(0.1, 4.0, 0.05, 1.0), 4, 0, 16).threads, 4);
  c = choose_threads(CpuSample{}, a, 4, 0, 2);
  EXPECT_FALSE(c.measured);
  EXPECT_EQ(c.threads, 2);
}

TEST(ThreadQuotaWarning, OnlyAboveTheQuota) {
  const CpuQuota q{1.5, "/sys/fs/cgroup/cpu.max", {}};
  EXPECT_EQ(thread_quota_warning(2, "--threads 2", q), "");
  EXPECT_EQ(thread_quota_warning(64, "--threads 64", CpuQuota{}), "");  // no quota
  const std::string w = thread_quota_warning(3, "--threads 3", q);
  EXPECT_EQ(w.rfind("--threads 3 starts 3 threads, but this process's cgroup CPU quota (/sys/fs/cgroup/cpu.max) is "
                    "1.5 cores: at most 2 run at once",
                    0),
            0u)
      << w;
  EXPECT_NE(w.find("2 or fewer is usually faster"), std::string::npos) << w;
}

TEST(ReadCpuSample, UnreadableFileIsInvalid) {
  EXPECT_FALSE(read_cpu_sample({0}, "/nonexistent/proc/stat").valid);
  EXPECT_FALSE(read_cpu_sample({0}, "/").valid);  // a directory
}

TEST(ReadCpuSample, ThisMachinesProcStatParses) {
  const CpuSample s = read_cpu_sample(usable_cores());
  if (!s.valid) GTEST_SKIP() << "/proc/stat is not readable here";
  EXPECT_GT(s.total, 0.0);
  EXPECT_LE(s.busy, s.total);
}

// The environment of one test: OMP_NUM_THREADS (ctest sets it) and the override unset.
class ThreadPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = getenv("OMP_NUM_THREADS")) saved_ = v, had_ = true;
    unsetenv("OMP_NUM_THREADS");
    unsetenv("MIXPREC_THREADS_OTHERS_BUSY");
    // No quota, whatever cgroup the test runs in (a CI container's --cpus): a policy made
    // without one reads this empty fake tree.
    setenv("MIXPREC_CGROUP_ROOT", "/nonexistent/mixprec-threads-test-cgroup", 1);
    omp_before_ = omp_get_max_threads();
  }
  void TearDown() override {
    if (had_) setenv("OMP_NUM_THREADS", saved_.c_str(), 1);
    unsetenv("MIXPREC_THREADS_OTHERS_BUSY");
    unsetenv("MIXPREC_CGROUP_ROOT");
    omp_set_num_threads(omp_before_);
  }
  // A sampler handing out the given samples in turn (the last one again when they run out).
  static ThreadPolicy::Sampler script(std::deque<CpuSample> samples) {
    auto q = std::make_shared<std::deque<CpuSample>>(std::move(samples));
    return [q] {
      CpuSample s = q->front();
      if (q->size() > 1) q->pop_front();
      return s;
    };
  }
  std::string saved_;
  bool had_ = false;
  int omp_before_ = 1;
};

TEST_F(ThreadPolicyTest, FollowsTheLoadSampleBySample) {
  // interval 0: every apply() measures. Quiet, then others on 1.6 of 2 cores, then quiet.
  ThreadPolicy p(0, 0.0,
                 script({sample(0, 0, 0, 0), sample(2, 2, 2, 1), sample(4, 4, 2.4, 2), sample(5, 6, 3.4, 3)}), 2);
  EXPECT_TRUE(p.adaptive());
  EXPECT_EQ(p.describe(), "adaptive (2 of 2 until measured)");
  EXPECT_EQ(p.apply(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(p.apply(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(p.describe(), "adaptive (now 1 of 2: other processes busy on ~1.6 cores)");
  EXPECT_EQ(p.apply(), 2);
  EXPECT_EQ(p.threads(), 2);
}

TEST_F(ThreadPolicyTest, WaitsForTheIntervalBetweenMeasurements) {
  // An hour between measurements: the first apply() decides nothing, settle() decides once.
  ThreadPolicy p(0, 3600.0, script({sample(0, 0, 0, 0), sample(2, 2, 0.4, 1), sample(4, 4, 4, 2)}), 2);
  EXPECT_EQ(p.apply(), 2);
  EXPECT_EQ(p.settle(0.0), 1);
  EXPECT_EQ(p.apply(), 1);  // the next sample (quiet) is not taken yet
  EXPECT_EQ(p.settle(0.0), 1);  // settled already
}

TEST_F(ThreadPolicyTest, UnreadableSamplesKeepAllCores) {
  ThreadPolicy p(0, 0.0, script({CpuSample{}}), 3);
  EXPECT_EQ(p.settle(0.0), 3);
  EXPECT_EQ(p.describe(), "adaptive (3 of 3: /proc/stat unreadable, all cores)");
}

TEST_F(ThreadPolicyTest, ThreadsFlagTurnsItOff) {
  int sampled = 0;
  ThreadPolicy p(3, 0.0, [&] { ++sampled; return sample(2, 2, 0, 1); }, 2);
  EXPECT_FALSE(p.adaptive());
  EXPECT_EQ(p.apply(), 3);
  EXPECT_EQ(p.settle(), 3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  EXPECT_EQ(p.describe(), "3 (--threads)");
  EXPECT_EQ(sampled, 0);
}

TEST_F(ThreadPolicyTest, OmpNumThreadsTurnsItOff) {
  setenv("OMP_NUM_THREADS", "3", 1);
  int sampled = 0;
  ThreadPolicy p(0, 0.0, [&] { ++sampled; return sample(2, 2, 0, 1); }, 2);
  EXPECT_FALSE(p.adaptive());
  p.settle();
  EXPECT_EQ(p.describe(), "OMP_NUM_THREADS=3");
  EXPECT_EQ(sampled, 0);
}

TEST_F(ThreadPolicyTest, AssumedLoadReplacesTheMeasurement) {
  setenv("MIXPREC_THREADS_OTHERS_BUSY", "1.6", 1);
  ThreadPolicy p(0, 0.0, script({sample(0, 0, 0, 0), sample(2, 2, 2, 1)}), 2);  // the samples say quiet
  EXPECT_EQ(p.settle(), 1);
  EXPECT_EQ(p.describe(), "adaptive (now 1 of 2: other processes busy on ~1.6 cores, as MIXPREC_THREADS_OTHERS_BUSY says)");
  setenv("MIXPREC_THREADS_OTHERS_BUSY", "lots", 1);
  ThreadPolicy q(0, 0.0, script({sample(0, 0, 0, 0), sample(2, 2, 2, 1)}), 2);
  EXPECT_EQ(q.settle(0.0), 2);
  EXPECT_NE(q.describe().find("MIXPREC_THREADS_OTHERS_BUSY='lots' ignored"), std::string::npos);
}

}  // namespace

// A container's quota: --cpus=1.5 on 4 cores computes on 2 threads at most, --cpus=0.5 on 1.
TEST_F(ThreadPolicyTest, TheCgroupQuotaCapsTheAdaptiveCount) {
  const CpuQuota q{1.5, "/sys/fs/cgroup/cpu.max", {}};
  ThreadPolicy p(0, 3600.0, script({sample(0, 0, 0, 0), sample(0.1, 4, 0.1, 1)}), 4, q);
  EXPECT_TRUE(p.adaptive());
  EXPECT_EQ(p.available(), 2);
  EXPECT_EQ(p.threads(), 2);  // before any measurement too
  EXPECT_EQ(p.describe(), "adaptive (2 of 4 until measured; cgroup CPU quota 1.5 cores)");
  EXPECT_EQ(p.settle(0.0), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(p.describe(), "adaptive (now 2 of 4: cgroup CPU quota 1.5 cores; other processes busy on ~0.0 cores)");
  EXPECT_EQ(p.quota_warning(), "");

  ThreadPolicy half(0, 3600.0, script({sample(0, 0, 0, 0), sample(0.1, 2, 0.1, 1)}), 2, CpuQuota{0.5, "x", {}});
  EXPECT_EQ(half.settle(0.0), 1);
  // A quota above the cores does not bind and is not mentioned.
  ThreadPolicy wide(0, 3600.0, script({sample(0, 0, 0, 0), sample(0.1, 2, 0.1, 1)}), 2, CpuQuota{8.0, "x", {}});
  EXPECT_EQ(wide.settle(0.0), 2);
  EXPECT_EQ(wide.describe(), "adaptive (now 2 of 2: other processes busy on ~0.0 cores)");
  // Unreadable /proc/stat: the quota's count, not all cores.
  ThreadPolicy blind(0, 3600.0, script({CpuSample{}}), 4, q);
  EXPECT_EQ(blind.settle(0.0), 2);
  EXPECT_EQ(blind.describe(), "adaptive (2 of 4: cgroup CPU quota 1.5 cores; /proc/stat unreadable)");
  // The assumed load is capped alike.
  setenv("MIXPREC_THREADS_OTHERS_BUSY", "0", 1);
  ThreadPolicy assumed(0, 3600.0, script({sample(0, 0, 0, 0)}), 4, CpuQuota{1.0, "x", {}});
  EXPECT_EQ(assumed.settle(), 1);
}

TEST_F(ThreadPolicyTest, TheQuotaFromTheEnvironmentsFakeTree) {
  char tmpl[] = "/tmp/mixprec_threads_cgroup.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl, file = root + "/cpu.max";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("100000 100000\n", f);
  fclose(f);
  setenv("MIXPREC_CGROUP_ROOT", root.c_str(), 1);
  ThreadPolicy p(0, 3600.0, script({sample(0, 0, 0, 0), sample(0.1, 2, 0.1, 1)}), 2);
  EXPECT_EQ(p.settle(0.0), 1);
  EXPECT_EQ(p.quota().source, file);
  // Malformed: no cap, and the line says what was ignored.
  f = fopen(file.c_str(), "w");
  fputs("one core please\n", f);
  fclose(f);
  ThreadPolicy q(0, 3600.0, script({sample(0, 0, 0, 0), sample(0.1, 2, 0.1, 1)}), 2);
  EXPECT_EQ(q.settle(0.0), 2);
  EXPECT_EQ(q.describe(), "adaptive (now 2 of 2: other processes busy on ~0.0 cores); " + file +
                              ": 'one core please' ignored: expected \"QUOTA PERIOD\" or \"max PERIOD\"");
  remove(file.c_str());
  rmdir(root.c_str());
}

// The default's workers (train and bench): one per usable core once other processes leave no
// core free (the adaptive count at 1), with the reason; none where the adaptive count has free
// cores to compute on, the count is the user's, the batch does not split or the machine is large.
TEST_F(ThreadPolicyTest, WorkersWhenOtherProcessesKeepCoresBusy) {
  const auto busy = [](double others, int cores, std::optional<CpuQuota> quota = CpuQuota{}) {
    // Over 1 s: the cores were busy `others` core-seconds, none of them this process's.
    return std::make_unique<ThreadPolicy>(0, 3600.0, script({sample(0, 0, 0, 0), sample(others, cores, 0, 1)}),
                                          cores, quota);
  };
  // The whole choice: its workers, why they were worth it, and what stood in the way.
  const auto expect_choice = [](const ThreadPolicy& p, int64_t batch, int workers, const std::string& load,
                                const std::string& obstacle) {
    const WorkerChoice w = choose_workers(p, batch);
    EXPECT_EQ(w.workers, workers) << load;
    EXPECT_EQ(w.load, load);
    EXPECT_EQ(w.obstacle, obstacle);
  };
  auto quiet = busy(0.0, 2);
  quiet->settle(0.0);
  expect_choice(*quiet, 16, 1, "", "");
  auto loaded = busy(1.6, 2);
  EXPECT_EQ(loaded->settle(0.0), 1);
  expect_choice(*loaded, 16, 2, "other processes busy on ~1.6 of 2 cores", "");
  // One busy core of 4: 3 threads compute on the free cores, no workers; 3.6 busy cores of 4
  // leave none: 4 workers, each with its share of every core.
  auto one_of_four = busy(1.0, 4);
  EXPECT_EQ(one_of_four->settle(0.0), 3);
  expect_choice(*one_of_four, 64, 1, "", "");
  auto most_of_four = busy(3.6, 4);
  EXPECT_EQ(most_of_four->settle(0.0), 1);
  EXPECT_EQ(choose_workers(*most_of_four, 64).workers, 4);

  expect_choice(*loaded, 15, 1, "other processes busy on ~1.6 of 2 cores", "the batch of 15 does not divide over 2 workers");
  EXPECT_EQ(choose_workers(*loaded, 1).workers, 1);

  // Within a quota of 2 cores on 4: 2 workers, not 4.
  auto quota = busy(3.5, 4, CpuQuota{2.0, "x", {}});
  EXPECT_EQ(quota->settle(0.0), 1);
  EXPECT_EQ(choose_workers(*quota, 64).workers, 2);
  // A quota of 1 core: nothing to share out.
  auto single = busy(1.9, 2, CpuQuota{1.0, "x", {}});
  single->settle(0.0);
  EXPECT_EQ(choose_workers(*single, 64).workers, 1);

  // More usable cores than kMaxAutoWorkers: the adaptive threads, and the reason.
  auto large = busy(15.0, 16);
  EXPECT_EQ(large->settle(0.0), 1);
  expect_choice(*large, 256, 1, "other processes busy on ~15.0 of 16 cores",
                "they are chosen on machines of up to 8 cores only (--workers N asks for them)");

  // The user's count: never workers, whatever the load.
  ThreadPolicy flag(2, 0.0, script({sample(0, 0, 0, 0), sample(2, 2, 0, 1)}), 2);
  flag.settle();
  expect_choice(flag, 16, 1, "", "");
}

// --threads and OMP_NUM_THREADS win over the quota, but say that they exceed it.
TEST_F(ThreadPolicyTest, ExplicitCountsWinOverTheQuotaWithAWarning) {
  const CpuQuota q{1.5, "/sys/fs/cgroup/cpu.max", {}};
  ThreadPolicy flag(4, 0.0, script({sample(0, 0, 0, 0)}), 2, q);
  EXPECT_EQ(flag.apply(), 4);
  EXPECT_EQ(flag.describe(), "4 (--threads; more than the cgroup CPU quota of 1.5 cores)");
  EXPECT_EQ(flag.quota_warning().rfind("--threads 4 starts 4 threads", 0), 0u) << flag.quota_warning();
  ThreadPolicy fits(2, 0.0, script({sample(0, 0, 0, 0)}), 2, q);
  EXPECT_EQ(fits.describe(), "2 (--threads)");
  EXPECT_EQ(fits.quota_warning(), "");
  setenv("OMP_NUM_THREADS", "3,1", 1);
  ThreadPolicy omp(0, 3600.0, script({sample(0, 0, 0, 0)}), 2, q);
  EXPECT_FALSE(omp.adaptive());
  EXPECT_EQ(omp.describe(), "OMP_NUM_THREADS=3,1 (more than the cgroup CPU quota of 1.5 cores)");
  EXPECT_EQ(omp.quota_warning().rfind("OMP_NUM_THREADS=3,1 starts 3 threads", 0), 0u) << omp.quota_warning();
  setenv("OMP_NUM_THREADS", "2", 1);
  ThreadPolicy omp_fits(0, 3600.0, script({sample(0, 0, 0, 0)}), 2, q);
  EXPECT_EQ(omp_fits.quota_warning(), "");
}

}  // namespace mixprec
