// core/cpu_quota.cpp: the cgroup CPU quota (include/mixprec/core/cpu_quota.h says why).
#include "mixprec/core/cpu_quota.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace mixprec {

namespace {

// cgroup files are a line; a longer "file" is not one (a fake tree gone wrong), and is read
// only this far.
constexpr size_t kMaxCgroupFileBytes = 4096;
constexpr size_t kMaxSelfCgroupBytes = size_t(1) << 16;  // one line per hierarchy

std::optional<std::string> read_small_file(const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  bool ok = true;
  while (text.size() < limit) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) ok = false;  // EISDIR, EACCES at read time: unreadable, no limit
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  if (text.size() > limit) text.resize(limit);
  return text;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// A whole token as an integer > 0.
std::optional<uint64_t> positive_integer(std::string_view token) {
  uint64_t v = 0;
  const auto r = std::from_chars(token.data(), token.data() + token.size(), v);
  if (r.ec != std::errc() || r.ptr != token.data() + token.size() || v == 0) return std::nullopt;
  return v;
}

std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    const size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

// A file's text for a message: trimmed, printable, short.
std::string quoted(std::string_view text) {
  text = trim(text);
  std::string out;
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 40) out += "...";
  return "'" + out + "'";
}

// One line of /proc/self/cgroup: "ID:CONTROLLERS:PATH" (PATH may hold ':').
struct CgroupLine {
  std::string_view id, controllers, path;
};

std::optional<CgroupLine> split_line(std::string_view line) {
  const size_t a = line.find(':');
  if (a == std::string_view::npos) return std::nullopt;
  const size_t b = line.find(':', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  return CgroupLine{line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)};
}

bool lists_cpu(std::string_view controllers) {
  size_t pos = 0;
  while (pos <= controllers.size()) {
    size_t end = controllers.find(',', pos);
    if (end == std::string_view::npos) end = controllers.size();
    if (controllers.substr(pos, end - pos) == "cpu") return true;
    pos = end + 1;
  }
  return false;
}

// The directories from `base`/PATH up to `base` itself, deepest first. A PATH that climbs
// ("/../x": the cgroup lies outside this cgroup namespace's root) cannot be found under the
// mount: only `base` then.
std::vector<std::string> levels(const std::string& base, std::string_view path) {
  std::vector<std::string_view> parts;
  bool climbs = false;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(pos, end - pos);
    if (part == "." || part == "..") climbs = true;
    else if (!part.empty()) parts.push_back(part);
    pos = end + 1;
  }
  if (climbs) parts.clear();
  std::vector<std::string> out;
  for (size_t depth = parts.size() + 1; depth-- > 0;) {
    std::string dir = base;
    for (size_t i = 0; i < depth; ++i) dir += "/" + std::string(parts[i]);
    out.push_back(std::move(dir));
  }
  return out;
}

void tighten(CpuQuota& q, double cores, const std::string& source) {
  if (cores > 0 && (!q.limited() || cores < q.cores)) {
    q.cores = cores;
    q.source = source;
  }
}

void read_v2(CpuQuota& q, const std::string& base, std::string_view path) {
  for (const std::string& dir : levels(base, path)) {
    const std::string file = dir + "/cpu.max";
    const auto text = read_small_file(file, kMaxCgroupFileBytes);
    if (!text) continue;
    if (const auto cores = parse_cpu_max(*text)) tighten(q, *cores, file);
    else q.ignored.push_back(file + ": " + quoted(*text) + " ignored: expected \"QUOTA PERIOD\" or \"max PERIOD\"");
  }
}

void read_v1(CpuQuota& q, const std::string& base, std::string_view path) {
  for (const std::string& dir : levels(base, path)) {
    const std::string quota_file = dir + "/cpu.cfs_quota_us";
    const auto quota = read_small_file(quota_file, kMaxCgroupFileBytes);
    if (!quota) continue;
    const std::string period = read_small_file(dir + "/cpu.cfs_period_us", kMaxCgroupFileBytes).value_or("");
    if (const auto cores = parse_cfs_quota(*quota, period)) tighten(q, *cores, quota_file);
    else
      q.ignored.push_back(quota_file + ": " + quoted(*quota) + " with cpu.cfs_period_us " + quoted(period) +
                          " ignored: expected a quota of -1 or > 0 microseconds and a period > 0");
  }
}

}  // namespace

int CpuQuota::threads() const {
  if (!limited()) return 0;
  const double up = std::ceil(cores);
  return up >= double(std::numeric_limits<int>::max()) ? std::numeric_limits<int>::max() : std::max(1, int(up));
}

std::string CpuQuota::cores_text() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", cores);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + (s == "1" ? " core" : " cores");
}

std::optional<double> parse_cpu_max(std::string_view text) {
  const std::vector<std::string_view> t = tokens(trim(text));
  if (t.size() == 1 && t[0] == "max") return 0.0;  // what writing "max" alone sets
  if (t.size() != 2) return std::nullopt;
  const auto period = positive_integer(t[1]);
  if (!period) return std::nullopt;
  if (t[0] == "max") return 0.0;
  const auto quota = positive_integer(t[0]);
  if (!quota) return std::nullopt;
  return double(*quota) / double(*period);
}

std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period) {
  quota = trim(quota);
  if (quota == "-1") return 0.0;  // no limit, whatever the period
  const auto q = positive_integer(quota);
  const auto p = positive_integer(trim(period));
  if (!q || !p) return std::nullopt;
  return double(*q) / double(*p);
}

CpuQuota cgroup_cpu_quota(const std::string& root, std::string_view self_cgroup) {
  CpuQuota q;
  bool any = false;
  size_t pos = 0;
  while (pos < self_cgroup.size()) {
    size_t end = self_cgroup.find('\n', pos);
    if (end == std::string_view::npos) end = self_cgroup.size();
    const auto line = split_line(trim(self_cgroup.substr(pos, end - pos)));
    pos = end + 1;
    if (!line) continue;
    if (line->id == "0" && line->controllers.empty()) {
      any = true;
      read_v2(q, is_directory(root + "/unified") ? root + "/unified" : root, line->path);
    } else if (lists_cpu(line->controllers)) {
      any = true;
      const std::string named = root + "/" + std::string(line->controllers);
      read_v1(q, is_directory(named) ? named : root + "/cpu", line->path);
    }
  }
  if (!any) read_v2(q, root, "/");  // nothing to go by: the mount's own limit, if any
  return q;
}

CpuQuota cpu_quota() {
  if (const char* fake = std::getenv("MIXPREC_CGROUP_ROOT"); fake && *fake) {
    const std::string root = fake;
    return cgroup_cpu_quota(root, read_small_file(root + "/self.cgroup", kMaxSelfCgroupBytes).value_or("0::/\n"));
  }
  return cgroup_cpu_quota("/sys/fs/cgroup", read_small_file("/proc/self/cgroup", kMaxSelfCgroupBytes).value_or(""));
}

}  // namespace mixprec
