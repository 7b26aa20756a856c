// run_index.h: the run directories under a set of folders, as `mixprec dashboard` shows them
// (docs/dashboard.md): finding them, naming them by ids a web client may send back without
// ever reaching a file outside those folders, whether a run is still training, and reading
// what a live run appended to its metrics.jsonl since the last look.
//
// A run directory is a folder holding config.json and metrics.jsonl (run_dir.h). A folder
// holding run directories that is not itself a run is an experiment when it holds a JSON
// file of its own (a sweep's state file) or lies below a given folder; its runs are its
// trials. Nothing here depends on what a sweep's state file contains.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::runs {

// True when dir holds both config.json and metrics.jsonl (following symlinks).
bool is_run_dir(const std::string& dir);

struct RunEntry {
  // "<root index>:<path below the root>", e.g. "0:sweep1/trial-0001" or "1:." for a given
  // folder that is itself a run; every byte of the path but [A-Za-z0-9._~-] and '/' as %XX,
  // so an id is ASCII and survives JSON whatever bytes a folder's name holds. The only name
  // of a run the dashboard's API accepts.
  std::string id;
  size_t root = 0;
  std::string relative;    // "sweep1/trial-0001", "." for the root itself
  std::string name;        // the last component ("trial-0001"; the root's own name for ".")
  std::string experiment;  // id of the experiment holding it, "" when it is in none
};

struct ExperimentEntry {
  std::string id, relative, name;
  std::vector<std::string> json_files;  // *.json directly in it, sorted (a sweep's state file)
};

struct RunIndex {
  std::vector<RunEntry> runs;                // sorted by id
  std::vector<ExperimentEntry> experiments;  // sorted by id
  bool truncated = false;                    // stopped at kMaxRuns runs
};

// How deep below a given folder runs are looked for (runs/sweep/trial-0001 is depth 2), and
// how many are listed at most: a dashboard pointed at / must not walk the whole disk.
inline constexpr int kMaxScanDepth = 4;
inline constexpr size_t kMaxRuns = 5000;

class RunRoots {
 public:
  // The folders as given; each must be an existing directory: not_found or invalid_argument
  // naming it otherwise.
  static StatusOr<RunRoots> open(const std::vector<std::string>& dirs);

  const std::vector<std::string>& given() const { return given_; }
  const std::vector<std::string>& canonical() const { return canonical_; }

  // Every run directory under the roots. A run directory is not searched further; symlinked
  // folders are followed only while they stay inside their root (each folder visited once).
  RunIndex scan() const;

  // The canonical path of the folder an id names, checked: invalid_argument for a malformed
  // id (no "<index>:", an unknown index, an absolute path, an empty or ".." component, a NUL
  // byte); not_found when the folder is missing, or its canonical path (symlinks resolved)
  // is outside its root.
  StatusOr<std::string> resolve_dir(const std::string& id) const;
  // resolve_dir, and the folder must be a run directory (not_found otherwise).
  StatusOr<std::string> resolve_run(const std::string& id) const;
  // The canonical path of file `name` (a plain file name) in the folder an id names, refused
  // (not_found) when it is missing or a symlink leads it out of the id's root.
  StatusOr<std::string> resolve_file(const std::string& id, const std::string& name) const;
  // The path to show a user for an id: the root as given, then the relative path.
  std::string display_path(const std::string& id) const;

 private:
  struct Parsed {
    size_t root;
    std::string relative;
  };
  StatusOr<Parsed> parse_id(const std::string& id) const;
  bool inside(size_t root, const std::string& canonical_path) const;
  std::vector<std::string> given_, canonical_;
};

// For each run directory, whether a process holds the flock on its run.lock
// (docs/checkpoints.md, "One run per directory"): the run is still training. Read from
// /proc/locks (once for all of them), so the lock is never taken, even for a moment (a
// `mixprec train` starting then would be refused with exit code 6); where /proc/locks cannot
// be read, by trying a shared lock without waiting. False when there is no lock file.
// proc_locks: the table to read (tests pass a missing file to take the fallback).
std::vector<bool> run_locks_held(const std::vector<std::string>& dirs, const std::string& proc_locks = "/proc/locks");

// True when no array or object in a JSON text is nested deeper than 64 levels: a parsed
// value's copies and dumps recurse per level, so the dashboard checks the metrics lines and
// state files it parses (files any tool may have written) first.
bool json_depth_ok(std::string_view text);

// What read_new_lines found since an offset of a metrics.jsonl.
struct NewLines {
  std::vector<std::string> lines;  // complete lines (without '\n'), in file order
  uint64_t offset = 0;   // where the next read starts: just after the last line returned
  uint64_t size = 0;     // the file's size when read
  std::string file_id;   // "<device>:<inode>": a resume rewrites the log into a new file
  bool reset = false;    // read from 0: `from` was past the end or not at a line start, or the file was replaced
  bool more = false;     // stopped at max_bytes with more complete lines to come: call again
};

// The complete lines a metrics.jsonl gained since byte offset `from`, reading only the bytes
// after it (at most max_bytes). A partial last line (still being written) is left for the
// next call. file_id, when not empty, is the one a previous call returned: a different file
// now at path means it was replaced, and reading restarts at 0 (reset). Errors: not_found,
// io_error (not a regular file, unreadable), data_loss when one line is longer than max_bytes.
StatusOr<NewLines> read_new_lines(const std::string& path, uint64_t from, const std::string& file_id,
                                  uint64_t max_bytes);

}  // namespace mixprec::runs
