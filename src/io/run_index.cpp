// io/run_index.cpp: finding run directories under the folders `mixprec dashboard` was given,
// and mapping the ids its web page sends back to folders inside them (run_index.h). Every
// path the dashboard opens goes through resolve_*: ids are parsed strictly, then the path is
// canonicalised (realpath) and must still lie inside its root, so neither "..", an absolute
// path nor a symlink pointing elsewhere reaches a file outside the given folders.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

#include "io/json_limits.h"
#include "mixprec/io/run_index.h"

namespace mixprec::runs {

namespace {

namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// realpath(3): symlinks, "." and ".." resolved; nullopt-like "" when the path does not exist.
std::string canonical_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '~' || c == '-';
}

std::string encode_relative(const std::string& relative) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : relative) {
    if (unreserved(c) || c == '/') {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// One percent-encoded path component; false for a bad escape.
bool decode_component(const std::string& in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    const int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
    const int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) return false;
    out += char(hi * 16 + lo);
    i += 2;
  }
  return true;
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::vector<std::string> json_files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0 && is_regular(it->path().string()))
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether canonical path p is root or below it (both canonical: no "..", no symlinks).
bool path_inside(const std::string& root, const std::string& p) {
  if (root == "/") return true;
  return p == root || (p.size() > root.size() && p.compare(0, root.size(), root) == 0 && p[root.size()] == '/');
}

struct Walker {
  const RunRoots& roots;
  size_t root;
  RunIndex& index;
  std::set<std::string> visited;  // canonical folders: a symlink loop is walked once

  std::string id_of(const std::string& relative) const {
    return std::to_string(root) + ":" + encode_relative(relative);
  }

  void visit(const std::string& canonical, const std::string& relative, int depth) {
    if (index.runs.size() >= kMaxRuns) {
      index.truncated = true;
      return;
    }
    if (!visited.insert(canonical).second) return;
    const std::string name = relative == "." ? base_name(roots.given()[root]) : base_name(relative);
    if (is_run_dir(canonical)) {
      index.runs.push_back({id_of(relative), root, relative, name, ""});
      return;
    }
    if (depth >= kMaxScanDepth) return;
    std::vector<std::string> children;
    std::error_code ec;
    for (fs::directory_iterator it(canonical, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string child = it->path().filename().string();
      if (child.empty() || child[0] == '.') continue;  // .git, editors' folders: never runs
      children.push_back(child);
    }
    std::sort(children.begin(), children.end());
    std::vector<size_t> direct_runs;
    for (const std::string& child : children) {
      const std::string child_canonical = canonical_path(canonical + "/" + child);
      if (child_canonical.empty() || !is_directory(child_canonical)) continue;
      if (!path_inside(roots.canonical()[root], child_canonical)) continue;  // a symlink out of the root
      const std::string child_relative = relative == "." ? child : relative + "/" + child;
      const size_t before = index.runs.size();
      visit(child_canonical, child_relative, depth + 1);
      if (index.runs.size() == before + 1 && index.runs[before].relative == child_relative)
        direct_runs.push_back(before);
    }
    if (direct_runs.empty()) return;
    std::vector<std::string> json = json_files_in(canonical);
    // A plain folder of runs given on the command line (runs/) is no experiment; one below
    // it, or one holding its own state file, is.
    if (relative == "." && json.empty()) return;
    const std::string id = id_of(relative);
    index.experiments.push_back({id, relative, name, std::move(json)});
    for (size_t i : direct_runs) index.runs[i].experiment = id;
  }
};

}  // namespace

bool json_depth_ok(std::string_view text) { return io::json_depth_within(text); }

bool is_run_dir(const std::string& dir) {
  return is_regular(dir + "/config.json") && is_regular(dir + "/metrics.jsonl");
}

StatusOr<RunRoots> RunRoots::open(const std::vector<std::string>& dirs) {
  RunRoots r;
  for (const std::string& d : dirs) {
    const std::string c = canonical_path(d);
    if (c.empty()) return Status::not_found("'" + d + "': no such directory");
    if (!is_directory(c)) return Status::invalid_argument("'" + d + "' is not a directory (expected a run directory or a folder of them)");
    r.given_.push_back(d);
    r.canonical_.push_back(c);
  }
  return r;
}

RunIndex RunRoots::scan() const {
  RunIndex index;
  for (size_t i = 0; i < canonical_.size(); ++i) {
    Walker w{*this, i, index, {}};
    w.visit(canonical_[i], ".", 0);
  }
  std::sort(index.runs.begin(), index.runs.end(), [](const RunEntry& a, const RunEntry& b) { return a.id < b.id; });
  std::sort(index.experiments.begin(), index.experiments.end(),
            [](const ExperimentEntry& a, const ExperimentEntry& b) { return a.id < b.id; });
  return index;
}

StatusOr<RunRoots::Parsed> RunRoots::parse_id(const std::string& id) const {
  const size_t colon = id.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 6)
    return Status::invalid_argument("run id '" + id + "': expected <index>:<path> as /api/runs lists it");
  size_t root = 0;
  for (size_t i = 0; i < colon; ++i) {
    if (id[i] < '0' || id[i] > '9') return Status::invalid_argument("run id '" + id + "': the part before ':' must be a number");
    root = root * 10 + size_t(id[i] - '0');
  }
  if (root >= canonical_.size())
    return Status::invalid_argument("run id '" + id + "': no folder " + std::to_string(root) + " (the dashboard was given " +
                                    std::to_string(canonical_.size()) + ")");
  const std::string rest = id.substr(colon + 1);
  if (rest == ".") return Parsed{root, "."};
  if (rest.empty() || rest[0] == '/') return Status::invalid_argument("run id '" + id + "': the path must be relative to its folder");
  std::string relative;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    if (slash == std::string::npos) slash = rest.size();
    std::string component;
    if (!decode_component(rest.substr(start, slash - start), component))
      return Status::invalid_argument("run id '" + id + "': a bad %XX escape");
    if (component.empty() || component == "." || component == ".." || component.find('/') != std::string::npos ||
        component.find('\0') != std::string::npos)
      return Status::invalid_argument("run id '" + id + "': empty, '.', '..' or '/' path components are refused");
    relative += (relative.empty() ? "" : "/") + component;
    start = slash + 1;
  }
  return Parsed{root, relative};
}

bool RunRoots::inside(size_t root, const std::string& canonical_path) const {
  return path_inside(canonical_[root], canonical_path);
}

StatusOr<std::string> RunRoots::resolve_dir(const std::string& id) const {
  auto parsed = parse_id(id);
  if (!parsed.is_ok()) return parsed.status();
  const std::string& root = canonical_[parsed->root];
  const std::string c = canonical_path(parsed->relative == "." ? root : root + "/" + parsed->relative);
  if (c.empty() || !is_directory(c)) return Status::not_found("run id '" + id + "': no such folder");
  if (!inside(parsed->root, c)) return Status::not_found("run id '" + id + "': leads outside the folders given");
  return c;
}

StatusOr<std::string> RunRoots::resolve_run(const std::string& id) const {
  auto dir = resolve_dir(id);
  if (!dir.is_ok()) return dir.status();
  if (!is_run_dir(*dir)) return Status::not_found("run id '" + id + "': not a run directory (no config.json and metrics.jsonl)");
  return dir;
}

StatusOr<std::string> RunRoots::resolve_file(const std::string& id, const std::string& name) const {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    return Status::invalid_argument("file name '" + name + "': expected a plain file name");
  auto dir = resolve_dir(id);
  if (!dir.is_ok()) return dir.status();
  const std::string c = canonical_path(*dir + "/" + name);
  if (c.empty()) return Status::not_found("run id '" + id + "': no " + name);
  if (!inside(parse_id(id)->root, c)) return Status::not_found("run id '" + id + "': " + name + " leads outside the folders given");
  return c;
}

std::string RunRoots::display_path(const std::string& id) const {
  auto parsed = parse_id(id);
  if (!parsed.is_ok()) return "";
  std::string given = given_[parsed->root];
  if (parsed->relative == ".") return given;
  while (given.size() > 1 && given.back() == '/') given.pop_back();
  return given + "/" + parsed->relative;
}

std::vector<bool> run_locks_held(const std::vector<std::string>& dirs, const std::string& proc_locks) {
  std::vector<bool> held(dirs.size(), false);
  // Lines such as "3: FLOCK  ADVISORY  WRITE 17498 fe:00:10953270 0 EOF" (proc(5)); waiters
  // ("3: -> FLOCK ...") hold nothing and are skipped.
  std::set<std::tuple<unsigned, unsigned, unsigned long>> flocks;
  std::ifstream locks(proc_locks);
  const bool have_table = locks.good();
  for (std::string line; have_table && std::getline(locks, line);) {
    char kind[16], dev_ino[64];
    unsigned long pid = 0;
    if (line.find("->") != std::string::npos) continue;
    if (std::sscanf(line.c_str(), "%*d: %15s %*s %*s %lu %63s", kind, &pid, dev_ino) != 3) continue;
    if (std::strcmp(kind, "FLOCK") != 0) continue;
    unsigned maj = 0, min = 0;
    unsigned long ino = 0;
    if (std::sscanf(dev_ino, "%x:%x:%lu", &maj, &min, &ino) == 3) flocks.insert({maj, min, ino});
  }
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string path = dirs[i] + "/run.lock";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (have_table) {
      held[i] = flocks.count({major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino}) > 0;
      continue;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) held[i] = errno == EWOULDBLOCK;
    ::close(fd);  // drops the shared lock if it was taken
  }
  return held;
}

}  // namespace mixprec::runs
