// progress.cpp: progress line formatting.
#include "progress.h"

#include <unistd.h>

#include <cmath>

namespace mixprec::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = long(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

Progress::Progress(std::FILE* out) : out_(out), tty_(isatty(fileno(out)) != 0) {}

void Progress::step(const train::StepReport& r) {
  const bool last = r.step == r.total_steps;
  // TTY: redraw at most 10x/s. Plain output: a line every 10 s, and the first and last step.
  const double interval = tty_ ? 0.1 : 10.0;
  if (!last && r.step != 1 && r.elapsed_seconds - last_print_ < interval) return;
  last_print_ = r.elapsed_seconds;
  const double eta = r.step > 0 ? r.elapsed_seconds / double(r.step) * double(r.total_steps - r.step) : 0;
  const int width = 24;
  const int filled = r.total_steps > 0 ? int(double(width) * double(r.step) / double(r.total_steps)) : 0;
  std::string bar(size_t(filled), '#');
  bar.resize(size_t(width), '.');
  char line[320];
  char scale[64] = "";
  if (r.scale != 1.0 || r.skipped_total > 0)
    std::snprintf(scale, sizeof scale, " | scale %g | skipped %lld", r.scale, (long long)r.skipped_total);
  std::snprintf(line, sizeof line, "epoch %lld [%s] step %lld/%lld | loss %.4f%s | %.0f img/s | ETA %s",
                (long long)r.epoch + 1, bar.c_str(), (long long)r.step, (long long)r.total_steps,
                r.loss, scale, r.images_per_second, format_duration(eta).c_str());
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K", line);
    line_open_ = true;
  } else {
    std::fprintf(out_, "%s\n", line);
  }
  std::fflush(out_);
}

void Progress::eval(const train::EvalReport& r, int64_t epochs) {
  finish();
  std::fprintf(out_, "epoch %lld/%lld: test accuracy %.2f%%  test loss %.4f  (%lld images)\n",
               (long long)r.epoch + 1, (long long)epochs, 100.0 * r.accuracy, r.loss,
               (long long)r.samples);
  std::fflush(out_);
}

void Progress::finish() {
  if (line_open_) std::fprintf(out_, "\n");
  line_open_ = false;
}

}  // namespace mixprec::cli
