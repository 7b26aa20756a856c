// child_process.cpp: see child_process.h.
#include "experiment/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace mixprec::experiment {

StatusOr<pid_t> start_child(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return Status::invalid_argument("start_child: no program");
  // Everything the child needs is prepared before fork: after it, only async-signal-safe
  // calls (dup2, prctl, execv, _exit) are allowed in a process that may have threads.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return Status::io_error("cannot open trial log '" + log_path + "': " + std::strerror(errno));
  const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log);
    if (null_in >= 0) ::close(null_in);
    return Status::io_error(std::string("cannot start a trial: fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Die with the sweep. If the sweep died before this line, getppid() is no longer it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // Its own process group: a Ctrl-C at the terminal reaches the sweep alone, which passes
    // one SIGINT on (a second one would make train abort without its checkpoint).
    ::setpgid(0, 0);
    if (null_in >= 0) ::dup2(null_in, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execv(args[0], args.data());
    static const char kMsg[] = "mixprec sweep: cannot execute the mixprec binary\n";
    const ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::close(log);
  if (null_in >= 0) ::close(null_in);
  return pid;
}

bool wait_for_run_lock(const std::string& run_dir, double timeout_seconds) {
  const std::string path = run_dir + "/run.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // never locked
  bool free = false;
  const timespec pause{0, 20'000'000};  // 20 ms between attempts
  for (double waited = 0; !free && waited <= timeout_seconds; waited += 0.02) {
    free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (free) ::flock(fd, LOCK_UN);
    else ::nanosleep(&pause, nullptr);
  }
  ::close(fd);
  return free;
}

std::string tail_lines(const std::string& path, int lines) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  const std::streamoff from = size > 4096 ? size - 4096 : 0;
  f.seekg(from);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t pos = text.size();
  for (int i = 0; i < lines && pos != std::string::npos && pos > 0; ++i) pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = (end > start ? dirs.substr(start, end - start) : std::string(".")) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace mixprec::experiment
