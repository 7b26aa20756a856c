// progress.cpp: progress line formatting.
#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

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

bool is_terminal(std::FILE* out) {
  // Under mpirun every rank's output is a pseudo-terminal that OpenMPI forwards to wherever
  // mpirun's own output goes, often a log file: there \r and escapes would be noise. A rank
  // cannot see that end, so it prints plain lines (PMIX_RANK / OMPI_COMM_WORLD_SIZE: set by
  // OpenMPI's launcher; PMI_RANK by other launchers).
  for (const char* launcher_variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(launcher_variable) != nullptr) return false;
  return isatty(fileno(out)) != 0;
}

int terminal_width(std::FILE* out) {
  const int fd = fileno(out);
  if (!is_terminal(out)) return 0;
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c && std::atoi(c) > 0) return std::atoi(c);
  return 80;
}

std::string progress_line(const train::StepReport& r, int width) {
  const double eta = r.step > 0 ? r.elapsed_seconds / double(r.step) * double(r.total_steps - r.step) : 0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "epoch %lld ", (long long)r.epoch + 1);
  const std::string epoch = buf;
  std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f", (long long)r.step, (long long)r.total_steps, r.loss);
  std::string core = buf;
  if (r.loss_scaling || r.skipped_total > 0) {
    std::snprintf(buf, sizeof buf, " | scale %g", r.scale);
    core += buf;
  }
  if (r.skipped_total > 0) {
    std::snprintf(buf, sizeof buf, " | skipped %lld", (long long)r.skipped_total);
    core += buf;
  }
  if (r.tokens_per_second > 0) std::snprintf(buf, sizeof buf, " | %.0f tok/s", r.tokens_per_second);
  else std::snprintf(buf, sizeof buf, " | %.0f img/s", r.images_per_second);
  const std::string speed = buf;
  const std::string eta_text = " | ETA " + format_duration(eta);
  auto bar = [&](int w) {
    const int filled = r.total_steps > 0 ? int(double(w) * double(r.step) / double(r.total_steps)) : 0;
    std::string b(size_t(std::min(filled, w)), '#');
    b.resize(size_t(w), '.');
    return "[" + b + "] ";
  };
  // Widest first; the first that fits is drawn. One column is kept free: writing into the
  // last column makes some terminals wrap before the \r.
  const size_t limit = width > 0 ? size_t(width - 1) : std::string::npos;
  const std::string fixed = epoch + core + speed + eta_text;
  if (width <= 0) return epoch + bar(24) + core + speed + eta_text;
  for (int w = 24; w >= 8; --w)
    if (fixed.size() + size_t(w) + 3 <= limit) return epoch + bar(w) + core + speed + eta_text;
  for (const std::string& s : {fixed, core + speed + eta_text, core + eta_text, core})
    if (s.size() <= limit) return s;
  return core.substr(0, limit);
}

Progress::Progress(std::FILE* out) : out_(out), tty_(is_terminal(out)) {}

void Progress::step(const train::StepReport& r) {
  if (r.skipped) {  // each skipped step is news: its own line, whatever the interval
    finish();
    std::fprintf(out_, "step %lld skipped: inf/NaN gradient in %s (%lld value%s%s); loss scale was %g\n",
                 (long long)r.step, r.nonfinite_tensor.empty() ? "?" : r.nonfinite_tensor.c_str(),
                 (long long)r.nonfinite_values, r.nonfinite_values == 1 ? "" : "s",
                 r.nonfinite_tensors > 1 ? (", and " + std::to_string(r.nonfinite_tensors - 1) + " more tensors").c_str()
                                         : "",
                 r.scale);
  }
  const bool last = r.step == r.total_steps;
  // TTY: redraw at most 10x/s. Plain output: a line every 10 s, and the first and last step.
  const double interval = tty_ ? 0.1 : 10.0;
  if (!last && r.step != 1 && r.elapsed_seconds - last_print_ < interval) return;
  last_print_ = r.elapsed_seconds;
  if (tty_) {
    // The width is asked each time: the user may resize the window mid-run.
    std::fprintf(out_, "\r%s\033[K", progress_line(r, terminal_width(out_)).c_str());
    line_open_ = true;
  } else {
    std::fprintf(out_, "%s\n", progress_line(r, 0).c_str());
  }
  std::fflush(out_);
}

void Progress::eval(const train::EvalReport& r, int64_t epochs) {
  finish();
  if (r.next_byte)  // a language model: the loss per byte in bits, the measure of text models
    std::fprintf(out_, "epoch %lld/%lld: test %.4f bits/byte (loss %.4f)  next-byte accuracy %.2f%%  (%lld bytes)\n",
                 (long long)r.epoch + 1, (long long)epochs, r.loss / std::log(2.0), r.loss, 100.0 * r.accuracy,
                 (long long)r.samples);
  else
    std::fprintf(out_, "epoch %lld/%lld: test accuracy %.2f%%  test loss %.4f  (%lld examples)\n",
                 (long long)r.epoch + 1, (long long)epochs, 100.0 * r.accuracy, r.loss, (long long)r.samples);
  std::fflush(out_);
}

void Progress::finish() {
  if (line_open_) std::fprintf(out_, "\n");
  line_open_ = false;
}

}  // namespace mixprec::cli
