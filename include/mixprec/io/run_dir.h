// run_dir.h: the folder a training run writes (runs/<name>/): config.json, metrics.jsonl,
// checkpoints and their last/best pointers, plots. Auto-naming follows Ultralytics'
// increment_path: "train", "train2", "train3", ... (the first free one).
//
// metrics.jsonl holds one JSON object per line, flushed as it is written:
//   {"type":"step","step":1,"epoch":0,"loss":2.30,"lr":0.001,"scale":65536,"skipped":false,"time":0.12}
//   {"type":"eval","step":235,"epoch":0,"accuracy":0.87,"loss":0.36}
// A process killed mid-write leaves at most one partial last line; the reader tolerates it
// and MetricsLog::open removes it before appending.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec {

struct RunDir {
  std::string path;  // "runs/train3"
  std::string name;  // "train3"
  std::string file(const std::string& relative) const { return path + "/" + relative; }
  std::string config_path() const { return file("config.json"); }
  std::string metrics_path() const { return file("metrics.jsonl"); }
};

// Creates base/name (base is created too). Empty name: the first free of "train",
// "train2", ... (mkdir's EEXIST decides, so two concurrent runs never share a folder).
// A given name that exists already is reused (a resume). When config_json is not empty it
// must be a JSON object and is written atomically to config.json.
// Errors: invalid_argument (bad name or config), io_error naming the path.
StatusOr<RunDir> create_run_dir(const std::string& base = "runs", const std::string& name = "",
                                 const std::string& config_json = "", const std::string& prefix = "train");
// The same for an explicit folder (--run-dir PATH): created with its parents if missing.
StatusOr<RunDir> open_run_dir(const std::string& path, const std::string& config_json = "");

// The text of a run's config.json at `path`, or nullopt when there is none. Read like every
// file mixprec did not just write: a FIFO, device or directory is refused at once (data_loss)
// instead of blocking, and more than 1 MiB is data_loss (a config is a few hundred bytes).
StatusOr<std::optional<std::string>> read_run_config(const std::string& path);

// One run per run directory: an exclusive flock(2) on <dir>/run.lock, held for as long as
// the object lives. The kernel drops it when the process ends in any way, kill -9 included,
// so a stale lock file never blocks the next run. While held, the file says who holds it
// ("pid 1234 host node7 since 2024-05-01T12:00:00Z"), for the message the next process gets.
// flock is per open file: a second acquire conflicts even inside the same process.
class RunDirLock {
 public:
  // Creates the lock file if missing. busy naming the directory and the holder when another
  // process (or open file) holds it; io_error naming the path otherwise.
  static StatusOr<std::unique_ptr<RunDirLock>> acquire(const std::string& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  RunDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

inline constexpr const char* kRunDirLockFile = "run.lock";

// What a run may do with a directory that already holds a run.
enum class RunDirMode : uint8_t {
  fresh,      // refuse it
  resume,     // continue it (mixprec train --resume)
  overwrite,  // delete the earlier run's files first (mixprec train --overwrite)
};

// The files that show a directory holds a run (finished or not), as run_dir-relative names:
// config.json, metrics.jsonl, last.json, best.json, step-*.safetensors and
// nonfinite-step-*.safetensors. Empty for a missing or empty directory. io_error if unreadable.
StatusOr<std::vector<std::string>> run_files(const std::string& dir);

// Creates dir (with its parents), takes its lock, then applies mode: fresh refuses
// (invalid_argument naming --resume and --overwrite) a directory whose run_files() is not
// empty; overwrite deletes those files and the earlier run's temp files and plots
// (*.tmp.<pid>; mixprec plot's training.{png,svg,gp}, plot_{steps,evals}.dat), nothing else;
// resume leaves it as it is.
// The lock is held until the returned object is destroyed.
StatusOr<std::unique_ptr<RunDirLock>> claim_run_dir(const std::string& dir, RunDirMode mode);

// One line of metrics.jsonl.
struct MetricsRecord {
  enum class Kind : uint8_t { step, eval } kind = Kind::step;
  int64_t step = 0, epoch = 0;
  double loss = 0.0;      // NaN when the line held null (a non-finite loss)
  double lr = 0.0, scale = 1.0, seconds = 0.0;  // step lines
  bool skipped = false;                         // step lines
  double accuracy = 0.0;                        // eval lines
};

struct MetricsFile {
  std::vector<MetricsRecord> records;
  bool truncated_last_line = false;  // a partial final line (kill -9) was ignored
};

// Reads metrics.jsonl. A partial last line (no newline, not valid JSON) is skipped and
// flagged; a malformed line before it is data_loss naming the file and the line number.
StatusOr<MetricsFile> read_metrics(const std::string& path);

// A step's gradient-underflow telemetry (train's --underflow-every; docs/amp.md): how many
// gradient elements, still multiplied by the loss scale as the 16-bit backward produced them,
// f16 would flush to 0 or keep only as a subnormal (mixprec/core/f16_range.h), over all gradients
// and for the worst tensors. Counted only where gradients pass through f16.
struct GradientUnderflow {
  struct PerTensor {
    std::string name;
    int64_t values = 0, subnormal = 0, flushed = 0;
  };
  int64_t values = 0, subnormal = 0, flushed = 0;  // over every gradient
  int64_t tensors = 0;        // gradients with a subnormal or flushed element (may exceed worst.size())
  std::vector<PerTensor> worst;  // the most affected first (subnormal + flushed), at most kMaxNames
  static constexpr size_t kMaxNames = 8;  // as the overflow list (MetricsLog::kMaxOverflowNames)
};

// Appends to metrics.jsonl, one flushed line per record (the line reaches the kernel before
// the call returns, so kill -9 loses nothing already logged).
class MetricsLog {
 public:
  // Opens path for appending (creating it). Drops a partial last line, and with
  // keep_through_step (a resume) also every record logged after that step, so the log
  // continues without duplicates. Errors: io_error, data_loss (malformed earlier lines).
  static StatusOr<std::unique_ptr<MetricsLog>> open(const std::string& path,
                                                    std::optional<int64_t> keep_through_step = {});
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // What a step line adds beyond the fixed fields, for the dashboard and anyone reading the
  // log live: the tracking allocator's bytes, and at a skipped step the tensors whose
  // gradients held inf/NaN (the GradScaler's attribution; at most kMaxOverflowNames named).
  struct StepExtras {
    int64_t memory_bytes = -1;       // tensor bytes held at the end of the step; < 0: not written
    int64_t peak_memory_bytes = -1;  // the run's peak tensor bytes so far; < 0: not written
    std::vector<std::pair<std::string, int64_t>> overflow;  // (tensor name, non-finite values)
    int64_t overflow_tensors = 0;    // how many tensors overflowed (may exceed overflow.size())
    std::optional<GradientUnderflow> underflow;  // at the steps that counted it
    int64_t ranks = 1;               // > 1: the processes of a data-parallel run (written as "ranks")
  };
  static constexpr size_t kMaxOverflowNames = 8;
  Status log_step(int64_t step, int64_t epoch, double loss, double lr, double scale, bool skipped,
                  double seconds, const StepExtras& extras);
  Status log_step(int64_t step, int64_t epoch, double loss, double lr, double scale, bool skipped,
                  double seconds) {
    return log_step(step, epoch, loss, lr, scale, skipped, seconds, StepExtras());
  }
  // seconds: how long the evaluation took (the step records' "time" includes it; a
  // time-to-accuracy benchmark subtracts it). Negative: not written.
  Status log_eval(int64_t step, int64_t epoch, double accuracy, double loss, double seconds = -1);
  const std::string& path() const { return path_; }

 private:
  MetricsLog(std::string path, FILE* f) : path_(std::move(path)), file_(f) {}
  Status write_line(const std::string& line);
  std::string path_;
  FILE* file_;
};

}  // namespace mixprec
