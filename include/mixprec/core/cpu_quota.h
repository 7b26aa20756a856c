// cpu_quota.h: the CPU quota of this process's cgroup, in cores: what `docker run --cpus=1.5`,
// a Kubernetes CPU limit or systemd's CPUQuota= give a process, whatever its affinity mask says.
//
// Why: such a process may run on every core of its mask, but the kernel (CFS bandwidth
// control) grants its cgroup only QUOTA microseconds of CPU per PERIOD; once its threads have
// spent them, every one of them waits for the next period. More threads than
// ceil(QUOTA/PERIOD) never run at once, and a step of many short OpenMP regions, each waiting
// at its end for its slowest thread, stalls at every throttle. Neither libgomp
// (omp_get_num_procs: the affinity mask), oneDNN nor PyTorch 1.13 (at::get_num_threads: the
// same) reads the quota, so mixprec's default thread count (threads.h) caps itself with it.
//
// Where: cgroup v2's cpu.max ("QUOTA PERIOD" or "max PERIOD") and v1's cpu.cfs_quota_us
// (-1: none) with cpu.cfs_period_us, in the process's cgroup (/proc/self/cgroup) and in each
// ancestor up to the mount: a parent's limit bounds its children, so the tightest wins.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec {

struct CpuQuota {
  double cores = 0;                  // QUOTA / PERIOD of the tightest limit found; 0: none
  std::string source;                // the file that set it: "/sys/fs/cgroup/user.slice/cpu.max"
  std::vector<std::string> ignored;  // malformed files, "FILE: 'TEXT' ignored: expected ..."
  bool limited() const { return cores > 0; }
  // The threads the quota lets run at once: ceil(cores), at least 1; 0 when not limited.
  int threads() const;
  // "1.5 cores", "1 core".
  std::string cores_text() const;
};

// cgroup v2's cpu.max text: QUOTA/PERIOD cores, 0 for "max PERIOD" or "max" (no limit);
// nullopt when malformed (not two positive integers or "max", a zero period).
std::optional<double> parse_cpu_max(std::string_view text);
// cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us texts: QUOTA/PERIOD cores, 0 for a quota
// of -1 (no limit); nullopt when malformed.
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);

// The tightest quota of the cgroups that `self_cgroup` (/proc/self/cgroup's text) names, and
// of their ancestors, under `root` (where the cgroup filesystems are mounted, /sys/fs/cgroup):
// v2 ("0::PATH") under root, or root/unified (a hybrid layout's v2 mount); v1
// ("N:cpu,cpuacct:PATH") under root/cpu,cpuacct or root/cpu. A level whose directory or files
// are missing or unreadable sets no limit (inside a container the mount is often the
// container's own cgroup, so PATH's deeper levels do not exist there and root is the one that
// counts); a malformed file is listed in `ignored` and sets none either: never an error.
CpuQuota cgroup_cpu_quota(const std::string& root, std::string_view self_cgroup);

// This process's quota: cgroup_cpu_quota("/sys/fs/cgroup", /proc/self/cgroup). A test hook,
// MIXPREC_CGROUP_ROOT=DIR, reads a fake tree instead: DIR as the mount and DIR/self.cgroup as
// /proc/self/cgroup (absent: "0::/", so DIR/cpu.max alone is a quota).
CpuQuota cpu_quota();

}  // namespace mixprec
