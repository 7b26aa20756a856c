// plot_command.cpp: `mixprec plot RUN_DIR...`: loss, test accuracy, loss scale and
// throughput against step, drawn by gnuplot from metrics.jsonl, as PNG and SVG. Several
// run directories go on one chart (what `mixprec compare` produces).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "exit_codes.h"

namespace mixprec::cli {

namespace fs = std::filesystem;

namespace {

// Writes RUN/plot_steps.dat (step loss scale steps_per_s) and RUN/plot_evals.dat
// (step accuracy). Lines that do not parse (a run killed mid-write) are skipped.
bool extract_series(const fs::path& run, std::string& error, int64_t& eval_rows) {
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
    const double rate = (last_time >= 0 && t > last_time) ? (step - last_step) / (t - last_time) : NAN;
    steps << step << ' ' << j["loss"].get<double>() << ' ' << j.value("scale", 1.0) << ' ' << rate << '\n';
    last_time = t;
    last_step = step;
    ++rows;
  }
  if (rows == 0) {
    error = (run / "metrics.jsonl").string() + ": no step records";
    return false;
  }
  return true;
}

std::string gnuplot_script(const std::vector<fs::path>& runs, const fs::path& out_base, const char* terminal,
                           bool have_evals) {
  std::ostringstream g;
  g << "set terminal " << terminal << " size 1200,900\n";
  g << "set output '" << out_base.string() << (std::string(terminal).rfind("svg", 0) == 0 ? ".svg" : ".png") << "'\n";
  g << "set multiplot layout 2,2 title 'mixprec training'\nset grid\nset key top right\n";
  auto plot = [&](const char* title, const char* file, const char* cols, bool logscale) {
    g << "set title '" << title << "'\nset xlabel 'step'\n" << (logscale ? "set logscale y\n" : "unset logscale y\n");
    g << "plot ";
    for (size_t i = 0; i < runs.size(); ++i)
      g << (i ? ", " : "") << "'" << (runs[i] / file).string() << "' using " << cols
        << (std::string(cols).find("with") == std::string::npos ? " with lines" : "") << " title '"
        << runs[i].filename().string() << "'";
    g << "\n";
  };
  plot("loss", "plot_steps.dat", "1:2", false);
  if (have_evals)
    plot("test accuracy (%)", "plot_evals.dat", "1:2 with linespoints pt 7", false);
  else
    g << "set multiplot next\n";  // no evaluation in these runs: leave the panel empty
  plot("loss scale", "plot_steps.dat", "1:3", true);
  plot("throughput (steps/s)", "plot_steps.dat", "1:4", false);
  g << "unset multiplot\n";
  return g.str();
}

}  // namespace

int plot_runs(const std::vector<std::string>& run_dirs, const std::string& output) {
  std::vector<fs::path> runs;
  int64_t eval_rows = 0;
  for (const auto& r : run_dirs) {
    std::string error;
    if (!extract_series(r, error, eval_rows)) {
      std::fprintf(stderr, "mixprec: error: %s\n", error.c_str());
      return kExitData;
    }
    runs.emplace_back(r);
  }
  const fs::path base = output.empty() ? runs.front() / "training" : fs::path(output);
  for (const char* terminal : {"pngcairo", "svg"}) {
    const fs::path script = base.string() + ".gp";
    std::ofstream(script) << gnuplot_script(runs, base, terminal, eval_rows > 0);
    const std::string cmd = "gnuplot '" + script.string() + "' 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
      std::fprintf(stderr, "mixprec: error: cannot run gnuplot (install gnuplot-nox)\n");
      return kExitRuntime;
    }
    char buf[256];
    std::string out;
    while (fgets(buf, sizeof buf, p)) out += buf;
    const int rc = pclose(p);
    if (rc != 0) {
      std::fprintf(stderr, "mixprec: error: gnuplot failed (is gnuplot-nox installed?): %s\n", out.c_str());
      return kExitRuntime;
    }
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
