// plot_command.cpp: `mixprec plot RUN_DIR...`: loss, test accuracy, loss scale and
// throughput against step, drawn by gnuplot from metrics.jsonl, as PNG and SVG. Several
// run directories go on one chart (what `mixprec compare` produces).
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/precision.h"

namespace mixprec::cli {

namespace fs = std::filesystem;

namespace {

// What the chart needs to know about a run beyond its metrics, from its config.json.
struct RunInfo {
  fs::path dir;
  std::string label;               // legend: "train3 (amp-bf16)", or just "amp-bf16" in a compare
  double images_per_step = 256.0;  // batch_size x accumulate
  bool has_scaler = true;          // false: the preset has no GradScaler, its "scale" is a placeholder 1
  int64_t step_rows = 0;
  double min_step = 0, max_step = 0;
};

extern "C" char** environ;

bool has_control_char(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; });
}

// A path inside the gnuplot script, single-quoted: gnuplot does no backquote (shell command)
// substitution inside single quotes, and '' is its escape for a quote, so a directory named
// with quotes, `$(...)` or backquotes stays a name. A line break would end the command and
// start another, so a path with a control character is refused (PlotError), not rewritten.
struct PlotError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
std::string quoted_path(const std::string& s) {
  if (has_control_char(s))
    throw PlotError("cannot plot '" + s + "': the path holds a control character (a newline, tab, ...); "
                    "rename the directory");
  std::string out;
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return "'" + out + "'";
}

// A legend entry (a directory name and the precision read from config.json, which anyone can
// edit): quoted like a path, control characters shown as '?' since a label need not be exact.
std::string quoted_label(std::string s) {
  for (char& c : s)
    if ((unsigned char)c < 0x20 || c == 0x7f) c = '?';
  return quoted_path(s);
}

// Writes `text` to `path` through a temporary file and a rename: an interrupted plot leaves the
// previous file or the new one, never half of one.
void write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw PlotError("cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw PlotError("cannot write " + path.string() + ": " + ec.message());
}

// Runs `gnuplot SCRIPT` directly (posix_spawnp, no shell: no name is ever parsed as a command)
// and returns its exit status; its stdout and stderr are collected into `output`.
int run_gnuplot(const fs::path& script, std::string& output) {
  int fds[2];
  if (pipe(fds) != 0) throw PlotError(std::string("cannot run gnuplot: pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::string program = "gnuplot", path = script.string();
  char* argv[] = {program.data(), path.data(), nullptr};
  pid_t pid = 0;
  const int spawn_rc = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawn_rc != 0) {
    close(fds[0]);
    throw PlotError(std::string("cannot run gnuplot: ") + std::strerror(spawn_rc) +
                    (spawn_rc == ENOENT ? " (install gnuplot-nox: scripts/setup does)" : ""));
  }
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (output.size() < (1u << 20)) output.append(buf, size_t(n));  // bounded: it is only shown
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

RunInfo run_info(const std::string& given) {
  RunInfo info;
  std::error_code ec;
  info.dir = fs::path(given);
  fs::path norm = fs::weakly_canonical(info.dir, ec);
  if (ec) norm = info.dir.lexically_normal();
  std::string name = norm.filename().string();
  if (name.empty()) name = norm.parent_path().filename().string();  // "runs/train3/"
  std::string precision;
  std::ifstream in(info.dir / "config.json");
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      if (j.contains("precision") && j["precision"].is_string()) precision = j["precision"].get<std::string>();
      const double batch = j.contains("batch_size") && j["batch_size"].is_number() ? j["batch_size"].get<double>() : 256.0;
      const double accumulate = j.contains("accumulate") && j["accumulate"].is_number() ? j["accumulate"].get<double>() : 1.0;
      info.images_per_step = batch * accumulate;
    }
  }
  if (auto p = amp::preset_by_name(precision); !precision.empty() && p.is_ok()) info.has_scaler = p->loss_scaling;
  info.label = precision.empty() || precision == name ? name : name + " (" + precision + ")";
  return info;
}

// Writes RUN/plot_steps.dat (step loss scale images_per_s) and RUN/plot_evals.dat
// (step accuracy). Lines that do not parse (a run killed mid-write) are skipped.
bool extract_series(const fs::path& run, RunInfo& info, std::string& error, int64_t& eval_rows) {
  std::ifstream in(run / "metrics.jsonl");
  if (!in) {
    error = (run / "metrics.jsonl").string() + ": cannot open (is this a run directory?)";
    return false;
  }
  std::ofstream steps(run / "plot_steps.dat"), evals(run / "plot_evals.dat");
  std::string line;
  double last_time = -1, last_step = 0;
  int64_t rows = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step")) continue;
    if (!j["step"].is_number()) continue;
    const double step = j["step"].get<double>();
    if (j.contains("accuracy")) {
      if (j["accuracy"].is_number()) {
        evals << step << ' ' << 100.0 * j["accuracy"].get<double>() << '\n';
        ++eval_rows;
      }
      continue;
    }
    if (!j.contains("loss") || !j["loss"].is_number()) continue;  // null: a non-finite loss
    const double t = j.value("time", 0.0);
    // images/s, the unit of the progress line (not steps/s, which depends on the batch size).
    // The first record has no previous one: its rate is over the time since the run began
    // (so a 1-step run still has a point, and gnuplot does not fail on an all-undefined column).
    const double rate = last_time >= 0 ? (t > last_time ? (step - last_step) * info.images_per_step / (t - last_time) : NAN)
                                       : (t > 0 ? step * info.images_per_step / t : NAN);
    steps << step << ' ' << j["loss"].get<double>() << ' ' << j.value("scale", 1.0) << ' ' << rate << '\n';
    last_time = t;
    last_step = step;
    if (rows == 0 || step < info.min_step) info.min_step = step;
    if (rows == 0 || step > info.max_step) info.max_step = step;
    ++rows;
  }
  if (rows == 0) {
    error = (run / "metrics.jsonl").string() + ": no step records";
    return false;
  }
  info.step_rows = rows;
  return true;
}

std::string gnuplot_script(const std::vector<RunInfo>& runs, const fs::path& out_base, const char* terminal,
                           bool have_evals) {
  std::ostringstream g;
  g << "set terminal " << terminal << " size 1200,900\n";
  g << "set output " << quoted_path(out_base.string() + (std::string(terminal).rfind("svg", 0) == 0 ? ".svg" : ".png"))
    << "\n";
  g << "set multiplot layout 2,2 title 'mixprec training'\nset grid\nset key top right\n";
  // All runs at one step (a 1-step run): gnuplot's autoscale would give an empty x range.
  double lo = runs.front().min_step, hi = runs.front().max_step;
  bool single_points = false;
  for (const RunInfo& r : runs) {
    lo = std::min(lo, r.min_step);
    hi = std::max(hi, r.max_step);
    single_points = single_points || r.step_rows < 2;
  }
  if (hi <= lo) g << "set xrange [" << lo - 1 << ":" << hi + 1 << "]\n";
  auto plot = [&](const char* title, const char* file, const char* cols, bool logscale, bool scalers_only = false) {
    g << "set title '" << title << "'\nset xlabel 'step'\n" << (logscale ? "set logscale y\n" : "unset logscale y\n");
    g << "plot ";
    bool first = true;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (scalers_only && !runs[i].has_scaler) continue;
      g << (first ? "" : ", ") << quoted_path((runs[i].dir / file).string()) << " using " << cols
        << (std::string(cols).find("with") != std::string::npos ? ""
            : single_points ? " with linespoints pt 7" : " with lines")
        << " title " << quoted_label(runs[i].label);
      first = false;
    }
    g << "\n";
  };
  plot("loss", "plot_steps.dat", "1:2", false);
  if (have_evals)
    plot("test accuracy (%)", "plot_evals.dat", "1:2 with linespoints pt 7", false);
  else
    g << "set multiplot next\n";  // no evaluation in these runs: leave the panel empty
  const bool any_scaler = std::any_of(runs.begin(), runs.end(), [](const RunInfo& r) { return r.has_scaler; });
  if (any_scaler) {
    plot("loss scale", "plot_steps.dat", "1:3", true, /*scalers_only=*/true);
  } else {  // bf16 / fp32 presets: no scaler, nothing to draw (not a flat line at 1)
    g << "set title 'loss scale: no loss scaler in these runs'\nset multiplot next\n";
  }
  plot("throughput (images/s)", "plot_steps.dat", "1:4", false);
  g << "unset multiplot\n";
  return g.str();
}

}  // namespace

int plot_runs(const std::vector<std::string>& run_dirs, const std::string& output) {
  for (const std::string& path : run_dirs)
    if (has_control_char(path)) {
      std::fprintf(stderr, "mixprec: error: plot: run directory '%s' holds a control character (a newline, tab, ...), "
                   "which the plot script cannot name; rename it\n", path.c_str());
      return kExitUsage;
    }
  if (has_control_char(output)) {
    std::fprintf(stderr, "mixprec: error: plot: --output '%s' holds a control character; choose another name\n",
                 output.c_str());
    return kExitUsage;
  }
  std::vector<RunInfo> runs;
  int64_t eval_rows = 0;
  for (const auto& r : run_dirs) {
    std::string error;
    RunInfo info = run_info(r);
    if (!extract_series(r, info, error, eval_rows)) {
      std::fprintf(stderr, "mixprec: error: %s\n", error.c_str());
      return kExitData;
    }
    runs.push_back(info);
  }
  const fs::path base = output.empty() ? runs.front().dir / "training" : fs::path(output);
  // The script is kept next to the plots (BASE.gp): edit it and run `gnuplot BASE.gp` to
  // restyle a chart. It holds the SVG pass, the last one written.
  const fs::path script = base.string() + ".gp";
  try {
    for (const char* terminal : {"pngcairo", "svg"}) {
      write_file_atomically(script, gnuplot_script(runs, base, terminal, eval_rows > 0));
      std::string out;
      if (run_gnuplot(script, out) != 0) {
        std::fprintf(stderr, "mixprec: error: gnuplot failed on %s: %s\n", script.string().c_str(), out.c_str());
        return kExitRuntime;
      }
    }
  } catch (const PlotError& e) {
    std::fprintf(stderr, "mixprec: error: %s\n", e.what());
    return kExitRuntime;
  }
  std::printf("plots: %s.png, %s.svg\n", base.string().c_str(), base.string().c_str());
  return kExitOk;
}

Runner add_plot_command(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("plot", "Plot loss, accuracy, loss scale and throughput of run directories");
  cmd->add_option("run_dirs", *dirs, "Run directories (holding metrics.jsonl); several share one chart")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("-o,--output", *output, "Output path without extension (default: RUN_DIR/training)");
  return [dirs, output]() -> int { return plot_runs(*dirs, *output); };
}

}  // namespace mixprec::cli
