// cpu_quota_test.cpp: the cgroup CPU quota (mixprec/core/cpu_quota.h) read from fake cgroup
// trees in a temporary directory: cgroup v2's cpu.max and v1's cfs files, nested limits,
// container mounts, hybrid layouts, and files that are malformed or unreadable (no limit,
// never an error). Nothing here reads the machine's own cgroup.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <string>

#include "mixprec/core/cpu_quota.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;

TEST(ParseCpuMax, QuotaOverPeriod) {
  EXPECT_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_EQ(parse_cpu_max("50000 100000"), 0.5);
  EXPECT_EQ(parse_cpu_max("400000 100000\n"), 4.0);
  EXPECT_EQ(parse_cpu_max("max 100000\n"), 0.0);  // no limit
  EXPECT_EQ(parse_cpu_max("max"), 0.0);
}

TEST(ParseCpuMax, MalformedIsNullopt) {
  for (const char* bad : {"", "\n", "abc", "150000", "0 100000", "150000 0", "-5 100000", "1.5 1", "150000 100000 7",
                          "99999999999999999999999 100000", "max 0", "max abc", "150000 100000x"})
    EXPECT_FALSE(parse_cpu_max(bad).has_value()) << "'" << bad << "'";
}

TEST(ParseCfsQuota, QuotaOverPeriod) {
  EXPECT_EQ(parse_cfs_quota("150000\n", "100000\n"), 1.5);
  EXPECT_EQ(parse_cfs_quota("50000", "100000"), 0.5);
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), 0.0);  // no limit
  EXPECT_EQ(parse_cfs_quota("-1", ""), 0.0);            // whatever the period
  for (auto [q, p] : {std::pair{"-2", "100000"}, {"abc", "100000"}, {"150000", ""}, {"150000", "0"}, {"0", "100000"},
                      {"", ""}, {"150000", "-100000"}})
    EXPECT_FALSE(parse_cfs_quota(q, p).has_value()) << q << " / " << p;
}

TEST(CpuQuota, ThreadsRoundUp) {
  EXPECT_EQ((CpuQuota{1.5}).threads(), 2);
  EXPECT_EQ((CpuQuota{0.5}).threads(), 1);
  EXPECT_EQ((CpuQuota{0.001}).threads(), 1);
  EXPECT_EQ((CpuQuota{2.0}).threads(), 2);
  EXPECT_EQ((CpuQuota{0.0}).threads(), 0);  // not limited
  EXPECT_EQ((CpuQuota{1e30}).threads(), INT_MAX);
  EXPECT_EQ((CpuQuota{1.5}).cores_text(), "1.5 cores");
  EXPECT_EQ((CpuQuota{1.0}).cores_text(), "1 core");
  EXPECT_EQ((CpuQuota{0.5}).cores_text(), "0.5 cores");
  EXPECT_EQ((CpuQuota{4.0 / 3.0}).cores_text(), "1.33 cores");
}

// A fake cgroup mount in a fresh temporary directory.
class FakeCgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mixprec_cgroup_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    unsetenv("MIXPREC_CGROUP_ROOT");
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void write(const std::string& relative, const std::string& text) {
    const fs::path p = fs::path(root_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  CpuQuota quota(const std::string& self) const { return cgroup_cpu_quota(root_, self); }
  std::string root_;
};

TEST_F(FakeCgroupTree, V2QuotaOfTheOwnCgroup) {
  write("a/b/cpu.max", "150000 100000\n");
  const CpuQuota q = quota("0::/a/b\n");
  EXPECT_EQ(q.cores, 1.5);
  EXPECT_EQ(q.threads(), 2);
  EXPECT_EQ(q.source, root_ + "/a/b/cpu.max");
  EXPECT_TRUE(q.ignored.empty());
  write("a/b/cpu.max", "50000 100000\n");
  EXPECT_EQ(quota("0::/a/b\n").threads(), 1);
  write("a/b/cpu.max", "max 100000\n");
  EXPECT_FALSE(quota("0::/a/b\n").limited());
}

TEST_F(FakeCgroupTree, NestedTheTightestAncestorWins) {
  write("cpu.max", "800000 100000\n");  // the mount (a container's own cgroup)
  write("a/cpu.max", "100000 100000\n");
  write("a/b/cpu.max", "300000 100000\n");
  write("a/b/c/cpu.max", "max 100000\n");
  CpuQuota q = quota("0::/a/b/c\n");
  EXPECT_EQ(q.cores, 1.0);
  EXPECT_EQ(q.source, root_ + "/a/cpu.max");
  write("a/b/c/cpu.max", "25000 100000\n");  // now the child is the tightest
  q = quota("0::/a/b/c\n");
  EXPECT_EQ(q.cores, 0.25);
  EXPECT_EQ(q.threads(), 1);
  // Another cgroup's limit (a sibling's) is not this process's.
  write("x/cpu.max", "10000 100000\n");
  EXPECT_EQ(quota("0::/a\n").cores, 1.0);
  EXPECT_EQ(quota("0::/y\n").cores, 8.0);  // /y has no directory: the mount's limit
}

TEST_F(FakeCgroupTree, ContainerMountWithoutTheDeeperLevels) {
  // Docker without a cgroup namespace: /proc/self/cgroup names the host's path, the mount is
  // the container's cgroup itself.
  write("cpu.max", "200000 100000\n");
  EXPECT_EQ(quota("0::/system.slice/docker-1234.scope\n").threads(), 2);
  // A path outside this namespace's root ("/../x") cannot be found under the mount: the
  // mount alone.
  write("x/cpu.max", "10000 100000\n");
  EXPECT_EQ(quota("0::/../x\n").cores, 2.0);
}

TEST_F(FakeCgroupTree, V1CfsFiles) {
  write("cpu,cpuacct/g/cpu.cfs_quota_us", "150000\n");
  write("cpu,cpuacct/g/cpu.cfs_period_us", "100000\n");
  write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const std::string self = "9:name=systemd:/g\n4:memory:/g\n2:cpu,cpuacct:/g\n0::/g\n";
  CpuQuota q = quota(self);
  EXPECT_EQ(q.cores, 1.5);
  EXPECT_EQ(q.threads(), 2);
  EXPECT_EQ(q.source, root_ + "/cpu,cpuacct/g/cpu.cfs_quota_us");
  // A tighter parent wins, as in v2.
  write("cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
  EXPECT_EQ(quota(self).cores, 0.5);
  // -1 everywhere: no limit.
  write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  write("cpu,cpuacct/g/cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(quota(self).limited());
}

TEST_F(FakeCgroupTree, V1UnderTheCpuLinkAndHybridLayouts) {
  // The controller list's directory is missing: root/cpu (the usual link) is used.
  write("cpu/cpu.cfs_quota_us", "100000\n");
  write("cpu/cpu.cfs_period_us", "100000\n");
  // A hybrid host: v2 is mounted at root/unified without the cpu controller.
  write("unified/cgroup.procs", "");
  EXPECT_EQ(quota("1:cpu,cpuacct:/\n0::/\n").cores, 1.0);
  // Both hierarchies limit: the tighter counts.
  write("unified/cpu.max", "50000 100000\n");
  EXPECT_EQ(quota("1:cpu,cpuacct:/\n0::/\n").cores, 0.5);
  // "cpuacct" or "cpuset" alone is not the cpu controller.
  EXPECT_EQ(quota("1:cpuacct,cpuset:/\n0::/\n").cores, 0.5);
}

TEST_F(FakeCgroupTree, MalformedFilesAreIgnoredNotFatal) {
  write("a/cpu.max", "lots of cpu\n");
  CpuQuota q = quota("0::/a\n");
  EXPECT_FALSE(q.limited());
  ASSERT_EQ(q.ignored.size(), 1u);
  EXPECT_EQ(q.ignored[0], root_ + "/a/cpu.max: 'lots of cpu' ignored: expected \"QUOTA PERIOD\" or \"max PERIOD\"");
  // A valid level still counts beside a malformed one.
  write("cpu.max", "100000 100000\n");
  q = quota("0::/a\n");
  EXPECT_EQ(q.cores, 1.0);
  EXPECT_EQ(q.ignored.size(), 1u);
  // v1: a quota without a usable period.
  write("cpu/cpu.cfs_quota_us", "150000\n");
  write("cpu/cpu.cfs_period_us", "0\n");
  q = quota("1:cpu:/\n");
  EXPECT_FALSE(q.limited());
  ASSERT_EQ(q.ignored.size(), 1u);
  EXPECT_NE(q.ignored[0].find("cpu.cfs_quota_us: '150000' with cpu.cfs_period_us '0' ignored"), std::string::npos);
  // A huge file is read only so far, and is not a number; binary bytes are shown as '?'.
  write("b/cpu.max", std::string(1 << 20, '7') + " 100000\n");
  write("c/cpu.max", std::string("\x01\xff 1\n", 5));
  q = cgroup_cpu_quota(root_ + "/b", "0::/\n");
  EXPECT_FALSE(q.limited());
  EXPECT_EQ(q.ignored.size(), 1u);
  q = cgroup_cpu_quota(root_ + "/c", "0::/\n");
  ASSERT_EQ(q.ignored.size(), 1u);
  EXPECT_NE(q.ignored[0].find("'?? 1'"), std::string::npos) << q.ignored[0];
}

TEST_F(FakeCgroupTree, UnreadableOrMissingFilesSetNoLimit) {
  fs::create_directories(fs::path(root_) / "a" / "cpu.max");  // a directory: read() fails
  CpuQuota q = quota("0::/a\n");
  EXPECT_FALSE(q.limited());
  EXPECT_TRUE(q.ignored.empty());
  EXPECT_FALSE(cgroup_cpu_quota(root_ + "/does-not-exist", "0::/a/b\n").limited());
  // /proc/self/cgroup's text unreadable or garbage: the mount's own limit.
  write("cpu.max", "300000 100000\n");
  EXPECT_EQ(quota("").cores, 3.0);
  EXPECT_EQ(quota("hello\n::\n:\n0:\n").cores, 3.0);
}

TEST_F(FakeCgroupTree, TheEnvironmentHookReadsAFakeTree) {
  write("k/cpu.max", "50000 100000\n");
  write("cpu.max", "max 100000\n");
  setenv("MIXPREC_CGROUP_ROOT", root_.c_str(), 1);
  EXPECT_FALSE(cpu_quota().limited());  // no self.cgroup: "0::/", the mount's cpu.max
  write("self.cgroup", "0::/k\n");
  const CpuQuota q = cpu_quota();
  EXPECT_EQ(q.cores, 0.5);
  EXPECT_EQ(q.source, root_ + "/k/cpu.max");
}

}  // namespace
}  // namespace mixprec
