// progress.h: training progress on the terminal: one self-updating line on a TTY, plain
// periodic lines otherwise (logs, CI), so output is readable in both.
#pragma once
#include <cstdio>
#include <string>

#include "mixprec/train.h"

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

std::string format_duration(double seconds);  // "1:02:03" / "2:03"
std::string format_bytes(int64_t bytes);       // "12.3 MiB"

}  // namespace mixprec::cli
