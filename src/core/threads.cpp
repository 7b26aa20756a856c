// core/threads.cpp: the adaptive thread count (include/mixprec/core/threads.h says why).
#include "mixprec/core/threads.h"

#include <fcntl.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

namespace mixprec {

namespace {

// /proc/stat's cpu lines come first; on a machine of hundreds of cores they are a few tens
// of KiB, and the interrupt counters after them can be much longer: stop after the last cpu
// line, and never hold more than this.
constexpr size_t kMaxProcStatBytes = size_t(4) << 20;

std::string read_cpu_lines(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
    // Done once the last cpu line is complete and what follows it is not one (three bytes
    // of "cpu" after it would have been found as a later "\ncpu").
    const size_t last_cpu = text.rfind("\ncpu");
    const size_t after = text.find('\n', last_cpu == std::string::npos ? 0 : last_cpu + 1);
    if (after != std::string::npos && text.size() >= after + 4) break;
    if (text.size() > kMaxProcStatBytes) break;
  }
  ::close(fd);
  return text;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double seconds_of(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

CpuSample parse_proc_stat(std::string_view text, const std::vector<int>& cores, double ticks_per_second) {
  CpuSample s;
  if (!(ticks_per_second > 0)) return s;
  std::vector<bool> seen(cores.size(), false);
  bool any = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    // "cpuN user nice system idle iowait irq softirq steal [guest guest_nice]"; the aggregate
    // "cpu " line is skipped (it covers cores this process may not use).
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    int core = -1;
    const char* p = line.data() + 3;
    const char* stop = line.data() + line.size();
    auto r = std::from_chars(p, stop, core);
    if (r.ec != std::errc() || r.ptr == stop || *r.ptr != ' ') return CpuSample{};
    p = r.ptr;
    unsigned long long v[8] = {};
    int fields = 0;
    while (fields < 8) {
      while (p < stop && *p == ' ') ++p;
      if (p == stop) break;
      auto f = std::from_chars(p, stop, v[fields]);
      if (f.ec != std::errc() || (f.ptr != stop && *f.ptr != ' ')) return CpuSample{};
      p = f.ptr;
      ++fields;
    }
    if (fields < 4) return CpuSample{};  // user nice system idle at least (Linux 2.4)
    size_t slot = 0;
    if (!cores.empty()) {
      const auto it = std::find(cores.begin(), cores.end(), core);
      if (it == cores.end()) continue;
      slot = size_t(it - cores.begin());
      if (seen[slot]) return CpuSample{};  // the same core twice: not /proc/stat
      seen[slot] = true;
    }
    // guest time is already inside user; steal is neither this machine's busy nor its idle.
    const double idle = double(v[3]) + double(v[4]);
    const double busy = double(v[0]) + double(v[1]) + double(v[2]) + double(v[5]) + double(v[6]);
    s.busy += busy / ticks_per_second;
    s.total += (busy + idle) / ticks_per_second;
    any = true;
  }
  if (!any || std::find(seen.begin(), seen.end(), false) != seen.end()) return CpuSample{};
  s.valid = true;
  return s;
}

ThreadChoice choose_threads(const CpuSample& before, const CpuSample& after, int cores, int current, int cap) {
  cores = std::max(cores, 1);
  const int most = cap > 0 ? std::min(cap, cores) : cores;
  ThreadChoice all{most, false, 0.0};
  if (!before.valid || !after.valid) return all;
  const double d_total = after.total - before.total, d_busy = after.busy - before.busy;
  const double d_own = after.own - before.own, d_wall = after.wall - before.wall;
  if (!(d_total > 0) || !(d_wall > 0) || !(d_busy >= 0) || !(d_own >= 0) || !std::isfinite(d_total + d_busy + d_own + d_wall))
    return all;
  const double busy_cores = double(cores) * std::min(1.0, d_busy / d_total);
  const double others = std::clamp(busy_cores - d_own / d_wall, 0.0, double(cores));
  // The quota caps the target itself, so that hysteresis never holds a count above it.
  const double target = std::min(double(cores) - others, double(most));
  int threads = int(std::lround(target));
  if (current >= 1 && current <= most && std::fabs(target - double(current)) < 0.6) threads = current;
  return ThreadChoice{std::clamp(threads, 1, most), true, others};
}

std::string thread_quota_warning(int threads, const std::string& setting, const CpuQuota& quota) {
  if (!quota.limited() || threads <= quota.threads()) return std::string();
  const std::string fit = std::to_string(quota.threads());
  return setting + " starts " + std::to_string(threads) + " threads, but this process's cgroup CPU quota (" +
         quota.source + ") is " + quota.cores_text() + ": at most " + fit +
         " run at once, and once the quota of a period is spent every thread waits for the next, so each "
         "parallel region waits for a throttled thread; " + fit + " or fewer is usually faster (the default follows the quota)";
}

std::vector<int> usable_cores() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

CpuSample read_cpu_sample(const std::vector<int>& cores, const std::string& proc_stat) {
  const double wall = steady_seconds();
  const double own = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
  static const double ticks = double(sysconf(_SC_CLK_TCK));
  CpuSample s = parse_proc_stat(read_cpu_lines(proc_stat), cores, ticks);
  s.own = own;
  s.wall = wall;
  return s;
}

ThreadPolicy::ThreadPolicy(int threads_flag, double interval, Sampler sampler, int cores, std::optional<CpuQuota> quota)
    : quota_(quota ? std::move(*quota) : cpu_quota()), flag_(threads_flag), interval_(interval), sampler_(std::move(sampler)) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  omp_env_ = omp ? omp : "";
  adaptive_ = threads_flag <= 0 && omp_env_.empty();
  std::vector<int> mine = usable_cores();
  cores_ = cores > 0 ? cores : std::max<int>(1, int(mine.size()));
  if (!sampler_) sampler_ = [mine] { return read_cpu_sample(mine); };
  available_ = quota_.limited() ? std::min(cores_, quota_.threads()) : cores_;
  threads_ = flag_ > 0 ? flag_ : available_;
  if (const char* assumed = std::getenv("MIXPREC_THREADS_OTHERS_BUSY"); assumed && *assumed) {
    char* end = nullptr;
    const double v = std::strtod(assumed, &end);
    if (end && *end == '\0' && v >= 0 && std::isfinite(v)) assumed_others_ = v;
    else assumed_problem_ = std::string("MIXPREC_THREADS_OTHERS_BUSY='") + assumed + "' ignored: expected cores >= 0";
  }
  if (adaptive_) {
    last_ = sampler_();
    last_real_ = steady_seconds();
  }
}

void ThreadPolicy::decide_locked(const CpuSample& now) {
  if (assumed_others_ >= 0) {
    const double target = std::min(double(cores_) - std::min(assumed_others_, double(cores_)), double(available_));
    choice_ = ThreadChoice{std::clamp(int(std::lround(target)), 1, available_), true, assumed_others_};
  } else {
    choice_ = choose_threads(last_, now, cores_, decided_ ? threads_ : 0, available_);
  }
  threads_ = choice_.threads;
  decided_ = true;
  last_ = now;
  last_real_ = steady_seconds();
}

int ThreadPolicy::apply() {
  if (!adaptive_) {
    if (flag_ > 0) omp_set_num_threads(flag_);
    return flag_ > 0 ? flag_ : omp_get_max_threads();
  }
  int n;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A sample only when the interval has passed: the clock read is all the cost in between.
    if (steady_seconds() - last_real_ >= interval_) decide_locked(sampler_());
    n = threads_;
  }
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
  return n;
}

int ThreadPolicy::settle(double window) {
  if (!adaptive_) return apply();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!decided_) {
      const double waited = steady_seconds() - last_real_;
      if (assumed_others_ < 0 && last_.valid && waited < window)
        std::this_thread::sleep_for(std::chrono::duration<double>(window - waited));
      decide_locked(sampler_());
    }
  }
  return apply();
}

int ThreadPolicy::threads() const {
  if (!adaptive_) return flag_ > 0 ? flag_ : omp_get_max_threads();
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_;
}

ThreadChoice ThreadPolicy::choice() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return choice_;
}

WorkerChoice choose_workers(const ThreadPolicy& settled, int64_t batch) {
  const int n = settled.available();
  if (!settled.adaptive() || n < 2 || settled.threads() > 1) return {};
  const ThreadChoice c = settled.choice();
  char busy[32];
  std::snprintf(busy, sizeof busy, "%.1f", c.others_busy);
  const std::string load = std::string("other processes busy on ~") + busy + " of " + std::to_string(n) + " cores";
  if (n > kMaxAutoWorkers)
    return {1, load, "they are chosen on machines of up to " + std::to_string(kMaxAutoWorkers) +
                         " cores only (--workers N asks for them)"};
  if (batch < n || batch % n != 0)
    return {1, load, "the batch of " + std::to_string(batch) + " does not divide over " + std::to_string(n) + " workers"};
  return {n, load, ""};
}

int ThreadPolicy::explicit_threads() const {
  if (flag_ > 0) return flag_;
  // OMP_NUM_THREADS's first number ("3" or "3,2": the outer level), as libgomp read it at start.
  int n = 0;
  const auto r = std::from_chars(omp_env_.data(), omp_env_.data() + omp_env_.size(), n);
  return r.ec == std::errc() && n > 0 ? n : omp_get_max_threads();
}

std::string ThreadPolicy::quota_excess() const {
  const int n = explicit_threads();
  if (!quota_.limited() || n <= quota_.threads()) return std::string();
  return "more than the cgroup CPU quota of " + quota_.cores_text();
}

std::string ThreadPolicy::quota_warning() const {
  if (adaptive_) return std::string();
  return thread_quota_warning(explicit_threads(),
                              flag_ > 0 ? "--threads " + std::to_string(flag_) : "OMP_NUM_THREADS=" + omp_env_, quota_);
}

std::string ThreadPolicy::describe() const {
  const std::string excess = adaptive_ ? std::string() : quota_excess();
  if (flag_ > 0) return std::to_string(flag_) + " (--threads" + (excess.empty() ? ")" : "; " + excess + ")");
  if (!adaptive_) return "OMP_NUM_THREADS=" + omp_env_ + (excess.empty() ? "" : " (" + excess + ")");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string of = std::to_string(threads_) + " of " + std::to_string(cores_);
  // The quota is named only where it binds: a --cpus=8 container on 2 cores changes nothing.
  const std::string quota = available_ < cores_ ? "cgroup CPU quota " + quota_.cores_text() : "";
  std::string d;
  if (!decided_) d = "adaptive (" + of + " until measured" + (quota.empty() ? ")" : "; " + quota + ")");
  else if (!choice_.measured)
    d = "adaptive (" + of + (quota.empty() ? ": /proc/stat unreadable, all cores)" : ": " + quota + "; /proc/stat unreadable)");
  else {
    char busy[32];
    std::snprintf(busy, sizeof busy, "%.1f", choice_.others_busy);
    d = "adaptive (now " + of + ": " + (quota.empty() ? "" : quota + "; ") + "other processes busy on ~" + busy +
        " cores" + (assumed_others_ >= 0 ? ", as MIXPREC_THREADS_OTHERS_BUSY says)" : ")");
  }
  if (!assumed_problem_.empty()) d += "; " + assumed_problem_;
  for (const std::string& ignored : quota_.ignored) d += "; " + ignored;
  return d;
}

}  // namespace mixprec
