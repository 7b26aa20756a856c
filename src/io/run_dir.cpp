// io/run_dir.cpp: creating runs/<name>/ and writing its config.json; the one-run-per-directory
// lock and the fresh/resume/overwrite policy.
#include "mixprec/io/run_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/byte_source.h"

namespace mixprec {

namespace {

// mkdir -p. EEXIST on a directory is fine; on anything else it is an error.
Status make_dirs(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("run directory: empty path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) == 0) continue;
    const int err = errno;
    struct stat sb;
    if (err == EEXIST && ::stat(prefix.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) continue;
    return Status::io_error("run directory '" + path + "': cannot create '" + prefix + "': " +
                            (err == EEXIST ? "exists and is not a directory" : std::strerror(err)));
  }
  return Status::ok();
}

bool valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

Status write_config(const RunDir& dir, const std::string& config_json) {
  if (config_json.empty()) return Status::ok();
  auto j = nlohmann::json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::invalid_argument("run directory '" + dir.path + "': config is not a JSON object");
  const std::string text = j.dump(2) + "\n";
  auto w = io::AtomicFileWriter::create(dir.config_path());
  if (!w.is_ok()) return w.status();
  MIXPREC_RETURN_IF_ERROR((*w)->write(text.data(), text.size()));
  return (*w)->commit();
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

StatusOr<RunDir> create_run_dir(const std::string& base, const std::string& name,
                                const std::string& config_json, const std::string& prefix) {
  if (!name.empty() && !valid_name(name))
    return Status::invalid_argument("run name '" + name + "': must be one path component (no '/')");
  MIXPREC_RETURN_IF_ERROR(make_dirs(base));
  RunDir dir;
  if (!name.empty()) {
    dir.name = name;
    dir.path = base + "/" + name;
    MIXPREC_RETURN_IF_ERROR(make_dirs(dir.path));
  } else {
    // Ultralytics' increment_path: train, train2, train3, ... Bounded so a full disk of
    // runs cannot loop forever.
    for (int i = 1;; ++i) {
      if (i > 100000) return Status::io_error("run directory: no free name under '" + base + "'");
      dir.name = i == 1 ? prefix : prefix + std::to_string(i);
      dir.path = base + "/" + dir.name;
      if (::mkdir(dir.path.c_str(), 0777) == 0) break;
      if (errno != EEXIST)
        return Status::io_error("run directory '" + dir.path + "': " + std::strerror(errno));
    }
  }
  MIXPREC_RETURN_IF_ERROR(write_config(dir, config_json));
  return dir;
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// step-<digits>.safetensors, optionally behind "nonfinite-" (checkpoint_filename's pattern).
bool is_checkpoint_name(const std::string& name) {
  std::string n = name;
  if (n.rfind("nonfinite-", 0) == 0) n = n.substr(10);
  const std::string prefix = "step-", suffix = ".safetensors";
  if (n.size() <= prefix.size() + suffix.size() || n.rfind(prefix, 0) != 0 || !ends_with(n, suffix)) return false;
  const std::string digits = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

bool is_run_file(const std::string& name) {
  return name == "config.json" || name == "metrics.jsonl" || name == "last.json" || name == "best.json" ||
         is_checkpoint_name(name);
}

// A temp file AtomicFileWriter leaves behind when killed: "<final name>.tmp.<pid>".
bool is_stale_temp(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at + 5 >= name.size()) return false;
  if (name.substr(at + 5).find_first_not_of("0123456789") != std::string::npos) return false;
  return is_run_file(name.substr(0, at));
}

StatusOr<std::vector<std::string>> list_dir(const std::string& dir, bool (*keep)(const std::string&)) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    return Status::io_error("run directory '" + dir + "': " + std::strerror(errno));
  }
  while (dirent* e = ::readdir(d))
    if (keep(e->d_name)) out.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace

StatusOr<std::unique_ptr<RunDirLock>> RunDirLock::acquire(const std::string& dir) {
  const std::string path = dir + "/" + kRunDirLockFile;
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::io_error("run directory '" + dir + "': cannot open lock file '" + path + "': " +
                                      std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      return Status::io_error("run directory '" + dir + "': cannot lock '" + path + "': " + std::strerror(err));
    }
    char buf[256] = {0};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    std::string holder = n > 0 ? std::string(buf, size_t(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Status(StatusCode::busy,
                  "run directory '" + dir + "' is in use by another mixprec process (" +
                      (holder.empty() ? std::string("it has not written its pid yet") : holder) +
                      "; lock file " + path + "): one run per directory; wait for it to finish, stop it, "
                      "or choose another --run-dir");
  }
  // Ours now: say who holds it (truncate first, a longer earlier holder line must not show).
  char when[32] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (::gmtime_r(&now, &tm)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const std::string text = "pid " + std::to_string(::getpid()) + " host " + host_name() + " since " + when + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != ssize_t(text.size())) {
    const int err = errno;
    ::close(fd);  // releases the lock
    return Status::io_error("run directory '" + dir + "': cannot write lock file '" + path + "': " +
                            std::strerror(err));
  }
  return std::unique_ptr<RunDirLock>(new RunDirLock(path, fd));
}

RunDirLock::~RunDirLock() {
  // The holder line goes with the lock, so a reader never mistakes a finished run for a live one.
  if (::ftruncate(fd_, 0) != 0) { /* best effort: the lock itself is released by close */ }
  ::close(fd_);
}

StatusOr<std::vector<std::string>> run_files(const std::string& dir) { return list_dir(dir, is_run_file); }

StatusOr<std::unique_ptr<RunDirLock>> claim_run_dir(const std::string& dir, RunDirMode mode) {
  MIXPREC_RETURN_IF_ERROR(make_dirs(dir));
  auto lock = RunDirLock::acquire(dir);
  if (!lock.is_ok()) return lock.status();
  // Checked under the lock: no other run can add or remove files meanwhile.
  auto files = run_files(dir);
  if (!files.is_ok()) return files.status();
  if (mode == RunDirMode::fresh && !files->empty()) {
    int64_t checkpoints = 0;
    for (const std::string& f : *files) checkpoints += is_checkpoint_name(f);
    std::string what;
    for (const std::string& f : *files)
      if (!is_checkpoint_name(f)) what += (what.empty() ? "" : ", ") + f;
    if (checkpoints) what += (what.empty() ? "" : ", ") + std::to_string(checkpoints) + " checkpoint file" +
                             (checkpoints == 1 ? "" : "s");
    return Status::invalid_argument("run directory '" + dir + "' already holds a run (" + what +
                                    "): pass --resume " + dir + " to continue it, --overwrite to replace it, "
                                    "or choose another --run-dir");
  }
  if (mode == RunDirMode::overwrite) {
    auto temps = list_dir(dir, is_stale_temp);
    if (!temps.is_ok()) return temps.status();
    std::vector<std::string> doomed = *files;
    doomed.insert(doomed.end(), temps->begin(), temps->end());
    for (const char* plot : {"training.png", "training.svg", "training.gp", "plot_steps.dat", "plot_evals.dat"})
      doomed.emplace_back(plot);
    for (const std::string& f : doomed) {
      const std::string p = dir + "/" + f;
      if (::unlink(p.c_str()) != 0 && errno != ENOENT)
        return Status::io_error("--overwrite: cannot delete '" + p + "': " + std::strerror(errno));
    }
  }
  return std::move(lock).value();
}

StatusOr<RunDir> open_run_dir(const std::string& path, const std::string& config_json) {
  MIXPREC_RETURN_IF_ERROR(make_dirs(path));
  RunDir dir{path, base_name(path)};
  MIXPREC_RETURN_IF_ERROR(write_config(dir, config_json));
  return dir;
}

StatusOr<std::optional<std::string>> read_run_config(const std::string& path) {
  auto text = io::read_regular_file(path, "run config", uint64_t(1) << 20);
  if (!text.is_ok()) {
    if (text.status().code() == StatusCode::not_found) return std::optional<std::string>();
    return text.status();
  }
  return std::optional<std::string>(std::move(text).value());
}

}  // namespace mixprec
