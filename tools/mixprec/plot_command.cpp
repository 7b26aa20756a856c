// plot_command.cpp: `mixprec plot RUN_DIR...`: loss, test accuracy (bits/byte for a language
// model), learning rate, throughput and, for runs with a loss scaler, the loss scale and the
// skipped steps against step, drawn by gnuplot from metrics.jsonl, as PNG and SVG: a figure to
// put in a report. Several run directories go on one chart (what `mixprec compare`
// produces), each run in one colour on every panel.
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
#include "mixprec/amp/precision.h"

namespace mixprec::cli {

namespace fs = std::filesystem;

namespace {

// A field of a record that may be damaged: its value when it has the type asked for, else the
// default (nlohmann's value() throws when the field is there with another type: a null scale,
// a hand-edited config.json).
double number_or(const nlohmann::json& j, const char* key, double otherwise) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : otherwise;
}
std::string string_or(const nlohmann::json& j, const char* key, const std::string& otherwise) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : otherwise;
}

// What the chart needs to know about a run beyond its metrics, from its config.json.
struct RunInfo {
  fs::path dir;
  std::string label;               // legend: "train3 (amp-bf16)", or just "amp-bf16" in a compare
  double images_per_step = 256.0;  // batch_size x accumulate
  // A language model's run: its samples are windows of `tokens_per_sample` bytes, its
  // throughput is in tokens/s and its test metric bits/byte (no accuracy).
  bool language_model = false;
  double tokens_per_sample = 0;
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
      precision = string_or(j, "precision", "");
      const double batch = number_or(j, "batch_size", 256.0);
      const double accumulate = number_or(j, "accumulate", 1.0);
      info.images_per_step = batch * accumulate;
      const std::string dataset = string_or(j, "dataset", "");
      const std::string model = string_or(j, "model", "");
      info.language_model = dataset == "text" || dataset == "kjv";
      // The window: what the run recorded for a model file, else the built-in's context.
      const double width = number_or(j, "input_width", 0.0);
      info.tokens_per_sample = width > 0 ? width : model == "gpt" ? 256 : model == "gpt-tiny" ? 128 : 0;
    }
  }
  if (auto p = amp::preset_by_name(precision); !precision.empty() && p.is_ok()) info.has_scaler = p->loss_scaling;
  info.label = precision.empty() || precision == name ? name : name + " (" + precision + ")";
  return info;
}

// Writes RUN/plot_steps.dat (step loss scale rate lr skipped-so-far) and RUN/plot_evals.dat
// (step accuracy% bits/byte). Lines that do not parse (a run killed mid-write) are skipped.
// The rate (images/s, or tokens/s for a language model) is taken over windows of about a
// hundredth of the run and leaves out the time spent evaluating, so evaluations and epoch
// boundaries do not show as spikes that are not the training's speed.
bool extract_series(const fs::path& run, RunInfo& info, std::string& error, int64_t& eval_rows) {
  std::ifstream in(run / "metrics.jsonl");
  if (!in) {
    error = (run / "metrics.jsonl").string() + ": cannot open (is this a run directory?)";
    return false;
  }
  struct StepRow {
    double step, loss, scale, lr, time;
    bool skipped;
  };
  std::vector<StepRow> rows;
  std::vector<std::pair<double, double>> eval_seconds;  // (after step, seconds spent)
  std::ofstream evals(run / "plot_evals.dat");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step")) continue;
    if (!j["step"].is_number()) continue;
    const double step = j["step"].get<double>();
    if (j.contains("accuracy")) {
      if (j["accuracy"].is_number()) {
        const double loss = number_or(j, "loss", NAN);
        evals << step << ' ' << 100.0 * j["accuracy"].get<double>() << ' ' << loss / std::log(2.0) << '\n';
        ++eval_rows;
      }
      if (j.contains("seconds") && j["seconds"].is_number()) eval_seconds.emplace_back(step, j["seconds"].get<double>());
      continue;
    }
    if (!j.contains("loss") || !j["loss"].is_number()) continue;  // null: a non-finite loss
    rows.push_back({step, j["loss"].get<double>(), number_or(j, "scale", 1.0), number_or(j, "lr", NAN),
                    number_or(j, "time", 0.0), j.contains("skipped") && j["skipped"].is_boolean() && j["skipped"].get<bool>()});
  }
  if (rows.empty()) {
    error = (run / "metrics.jsonl").string() + ": no step records";
    return false;
  }
  // Wall time without evaluation: each eval's seconds are taken off the steps after it.
  std::vector<double> train_time(rows.size());
  double evaluating = 0;
  size_t e = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    while (e < eval_seconds.size() && eval_seconds[e].first < rows[i].step) evaluating += eval_seconds[e++].second;
    train_time[i] = rows[i].time - evaluating;
  }
  const double per_sample = info.language_model && info.tokens_per_sample > 0 ? info.tokens_per_sample : 1.0;
  const size_t window = std::max<size_t>(1, rows.size() / 100);
  std::ofstream steps(run / "plot_steps.dat");
  int64_t skipped = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    skipped += rows[i].skipped;
    // The rate over the last `window` steps (from the run's start for the first ones).
    const size_t from = i >= window ? i - window : 0;
    const double dt = i >= window ? train_time[i] - train_time[from] : train_time[i];
    const double ds = i >= window ? rows[i].step - rows[from].step : rows[i].step;
    const double rate = dt > 0 ? ds * info.images_per_step * per_sample / dt : NAN;
    steps << rows[i].step << ' ' << rows[i].loss << ' ' << rows[i].scale << ' ' << rate << ' ' << rows[i].lr << ' '
          << skipped << '\n';
    if (i == 0 || rows[i].step < info.min_step) info.min_step = rows[i].step;
    if (i == 0 || rows[i].step > info.max_step) info.max_step = rows[i].step;
  }
  info.step_rows = int64_t(rows.size());
  return true;
}

// One colour per run, the same on every panel (gnuplot's automatic colours restart on each
// plot command, so a run could be drawn in another run's colour).
const char* run_colour(size_t i) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return kColours[i % (sizeof kColours / sizeof kColours[0])];
}

std::string gnuplot_script(const std::vector<RunInfo>& runs, const fs::path& out_base, const char* terminal,
                           bool have_evals) {
  const bool any_scaler = std::any_of(runs.begin(), runs.end(), [](const RunInfo& r) { return r.has_scaler; });
  const bool all_text = std::all_of(runs.begin(), runs.end(), [](const RunInfo& r) { return r.language_model; });
  const bool any_text = std::any_of(runs.begin(), runs.end(), [](const RunInfo& r) { return r.language_model; });
  // Panels: loss, the test metric, learning rate, throughput; with a loss scaler also the scale
  // and the skipped steps. Only panels with something to draw: no empty quadrant.
  const int panels = 3 + (have_evals ? 1 : 0) + (any_scaler ? 2 : 0);
  const int rows = (panels + 1) / 2;
  std::ostringstream g;
  g << "set terminal " << terminal << " size 1200," << 330 * rows << " font 'sans,10'\n";
  g << "set output " << quoted_path(out_base.string() + (std::string(terminal).rfind("svg", 0) == 0 ? ".svg" : ".png"))
    << "\n";
  g << "set multiplot layout " << rows << ",2 title 'mixprec training'\nset grid\nset key top right\n";
  // All runs at one step (a 1-step run): gnuplot's autoscale would give an empty x range.
  double lo = runs.front().min_step, hi = runs.front().max_step;
  bool single_points = false;
  for (const RunInfo& r : runs) {
    lo = std::min(lo, r.min_step);
    hi = std::max(hi, r.max_step);
    single_points = single_points || r.step_rows < 2;
  }
  // Every panel on the training steps' x range (an evaluation panel would otherwise start at the
  // first evaluation); all runs at one step (a 1-step run) get a range around it.
  if (hi <= lo) g << "set xrange [" << lo - 1 << ":" << hi + 1 << "]\n";
  else g << "set xrange [" << lo << ":" << hi << "]\n";
  // Headroom above the highest point, so a flat line (a constant learning rate) is not drawn
  // on the frame.
  g << "set offsets 0, 0, graph 0.05, 0\n";
  // yrange: "[0:*]" from zero (so noise does not look like a trend), "" autoscaled (log).
  auto plot = [&](const std::string& title, const char* file, const char* cols, const char* yrange, bool logscale,
                  bool points, bool scalers_only = false) {
    g << "set title '" << title << "'\nset xlabel 'step'\n" << (logscale ? "set logscale y\n" : "unset logscale y\n");
    g << (yrange[0] ? std::string("set yrange ") + yrange + "\n" : std::string("set autoscale y\n"));
    g << "plot ";
    bool first = true;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (scalers_only && !runs[i].has_scaler) continue;
      g << (first ? "" : ", ") << quoted_path((runs[i].dir / file).string()) << " using " << cols
        << (points || single_points ? " with linespoints pt 7 ps 0.6" : " with lines lw 1.5") << " lc rgb '"
        << run_colour(i) << "' title " << quoted_label(runs[i].label);
      first = false;
    }
    g << "\n";
  };
  plot("training loss", "plot_steps.dat", "1:2", "[0:*]", false, false);
  if (have_evals) {
    if (all_text)
      plot("test bits per byte", "plot_evals.dat", "1:3", "[0:*]", false, true);
    else
      plot(any_text ? "test accuracy (%; next-byte for language models)" : "test accuracy (%)", "plot_evals.dat", "1:2",
           "[0:105]", false, true);
  }
  plot("learning rate", "plot_steps.dat", "1:5", "[0:*]", false, false);
  plot(all_text ? "throughput (tokens/s)" : any_text ? "throughput (images/s; tokens/s for language models)"
                                                     : "throughput (images/s)",
       "plot_steps.dat", "1:4", "[0:*]", false, false);
  if (any_scaler) {
    plot("loss scale", "plot_steps.dat", "1:3", "", true, false, /*scalers_only=*/true);
    plot("skipped steps (inf/NaN gradients), so far", "plot_steps.dat", "1:6", "[0:*]", false, false,
         /*scalers_only=*/true);
  }
  if (panels % 2 == 1) g << "set multiplot next\n";
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
  CLI::App* cmd = app.add_subcommand(
      "plot", "Plot loss, accuracy (bits/byte), learning rate, throughput and loss scale of run directories");
  cmd->add_option("run_dirs", *dirs, "Run directories (holding metrics.jsonl); several share one chart")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("-o,--output", *output, "Output path without extension (default: RUN_DIR/training)");
  return [dirs, output]() -> int { return plot_runs(*dirs, *output); };
}

}  // namespace mixprec::cli
