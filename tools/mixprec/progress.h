// progress.h: training progress on the terminal: one self-updating line on a TTY, fitted to
// the terminal's width (it never wraps), and plain periodic lines otherwise (logs, CI), so
// output is readable in both. A step the loss scaler skipped gets its own line naming the
// first parameter whose gradient overflowed.
#pragma once
#include <cstdio>
#include <string>

#include "mixprec/train/train.h"

namespace mixprec::cli {

class Progress {
 public:
  explicit Progress(std::FILE* out);
  void step(const train::StepReport& r);
  void eval(const train::EvalReport& r, int64_t epochs);
  void finish();  // ends a pending TTY line

 private:
  std::FILE* out_;
  bool tty_;
  bool line_open_ = false;
  double last_print_ = -1e9;
};

// The progress line of a step in at most `width` columns (0: no limit): the bar shrinks
// first, then images/s, the epoch and the ETA are dropped.
std::string progress_line(const train::StepReport& r, int width);
// A terminal a person watches: a TTY, and not a rank started by mpirun (whose TTY is
// OpenMPI's forwarding pseudo-terminal, usually ending in a log file).
bool is_terminal(std::FILE* out);
// Columns of the terminal `out` is (TIOCGWINSZ; $COLUMNS if that fails; 80), 0 if not one.
int terminal_width(std::FILE* out);

std::string format_duration(double seconds);  // "1:02:03" / "2:03"
std::string format_bytes(int64_t bytes);       // "12.3 MiB"

}  // namespace mixprec::cli
