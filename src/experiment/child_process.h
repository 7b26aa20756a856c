// child_process.h: the trials of a sweep as child processes: `mixprec train` started with
// fork and execv (an argument vector, never a shell, so no user text is ever parsed as a
// command), its output appended to the trial's log, and tied to the sweep's life: if the
// sweep dies, even by kill -9, the kernel kills its trials (PR_SET_PDEATHSIG), so a resumed
// sweep never meets an orphan still training in a trial's directory.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::experiment {

// Starts argv[0] with argv, stdin from /dev/null, stdout and stderr appended to log_path.
// io_error naming what failed (the log, fork); an exec failure shows as exit code 127 with
// the reason in the log.
StatusOr<pid_t> start_child(const std::vector<std::string>& argv, const std::string& log_path);

// Waits (up to timeout_seconds) until no process holds the run lock of run_dir (run.lock,
// run_dir.h): a trial killed with its sweep releases it when the kernel has reaped it, which
// can be a moment after the new sweep starts. True when free (or there is no lock file).
bool wait_for_run_lock(const std::string& run_dir, double timeout_seconds);

// The first executable file named `name` in the folders of $PATH (as a shell would find
// it; start_child's execv searches nothing), or "" when there is none.
std::string find_on_path(const std::string& name);

// The last `lines` lines of a text file (a failed trial's log), at most 4 KiB.
std::string tail_lines(const std::string& path, int lines);

}  // namespace mixprec::experiment
