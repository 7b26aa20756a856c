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
#include <string>
#include <vector>

#include "mixprec/status.h"

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

  Status log_step(int64_t step, int64_t epoch, double loss, double lr, double scale, bool skipped,
                  double seconds);
  Status log_eval(int64_t step, int64_t epoch, double accuracy, double loss);
  const std::string& path() const { return path_; }

 private:
  MetricsLog(std::string path, FILE* f) : path_(std::move(path)), file_(f) {}
  Status write_line(const std::string& line);
  std::string path_;
  FILE* file_;
};

}  // namespace mixprec
