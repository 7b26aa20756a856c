// sweep_command.cpp: `mixprec sweep EXPERIMENT.yaml [--experiment-dir DIR] [--resume]`: a
// hyperparameter experiment (docs/experiments.md). The library runs it (mixprec/experiment/sweep.h);
// this file reads the flags, prints the progress lines and the final table with the command
// that reproduces the best trial, and maps the outcome to the exit codes of docs/cli.md.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/experiment/experiment.h"
#include "mixprec/experiment/sweep.h"

namespace mixprec::cli {
namespace {

std::atomic<bool> g_stop{false};

void on_stop(int) {
  g_stop.store(true);
  static const char kMsg[] = "\nmixprec sweep: stopping: the running trials save checkpoints (Ctrl-C again to abort)\n";
  const ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)ignored;
}

// This very binary: the trials run the same mixprec as the sweep.
std::string own_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, size_t(n));
}

// A JSON text as a user reads it in a table: strings without their quotes.
std::string plain(const std::string& json_text) {
  if (json_text.size() >= 2 && json_text.front() == '"' && json_text.back() == '"')
    return json_text.substr(1, json_text.size() - 2);
  return json_text;
}

// An argument as a POSIX shell reads it back: quoted when it holds anything but safe characters.
std::string shell_word(const std::string& s) {
  bool safe = !s.empty();
  for (char c : s) safe = safe && (std::isalnum(static_cast<unsigned char>(c)) || std::string("/._-+=:,").find(c) != std::string::npos);
  if (safe) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void print_table(const experiment::ExperimentSpec& spec, const experiment::SweepResult& r) {
  std::vector<std::string> header = {"trial", "state", "steps", spec.metric};
  for (const experiment::Hyperparameter& h : spec.hyperparameters) header.push_back(h.name);
  std::vector<std::vector<std::string>> rows;
  for (const experiment::TrialRecord& t : r.state.trials) {
    char metric[32] = "-";
    if (!t.metrics.empty() && !std::isnan(t.metrics.back())) std::snprintf(metric, sizeof metric, "%.4f", t.metrics.back());
    std::vector<std::string> row = {std::to_string(t.id) + (t.id == r.best ? " *" : ""), t.state,
                                    std::to_string(t.steps), metric};
    for (const experiment::Hyperparameter& h : spec.hyperparameters) {
      std::string v = "-";
      for (const auto& [k, text] : t.hyperparameters)
        if (k == h.name) v = plain(text);
      row.push_back(v);
    }
    rows.push_back(row);
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c)
      s += (c ? "  " : "") + cells[c] + std::string(width[c] - cells[c].size(), ' ');
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  std::printf("\n");
  line(header);
  for (const auto& row : rows) line(row);
  for (const experiment::TrialRecord& t : r.state.trials)
    if (t.state == "failed") std::printf("trial %lld failed: %s\n", (long long)t.id, t.error.c_str());
}

}  // namespace

Runner add_sweep_command(CLI::App& app) {
  struct Flags {
    std::string file, dir;
    bool resume = false;
    int cores = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("sweep", "Hyperparameter experiment: grid, random or ASHA search over trials "
                                              "(docs/experiments.md)");
  cmd->add_option("experiment", f->file, "The experiment file (YAML or JSON)")->required();
  cmd->add_option("--experiment-dir", f->dir, "Where the trials and experiment.json go (default: experiments/<name>)");
  cmd->add_flag("--resume", f->resume, "Continue the experiment in the experiment directory");
  cmd->add_option("--cores", f->cores, "Cores the trials share (default: all this process may use)")
      ->check(integer_in(1, 4096));
  return [f]() -> int {
    auto spec = experiment::load_experiment(f->file);
    if (!spec.is_ok()) {
      std::fprintf(stderr, "mixprec: usage error: %s\n", spec.status().message().c_str());
      return kExitUsage;
    }
    experiment::SweepOptions opt;
    opt.experiment_dir = f->dir;
    opt.resume = f->resume;
    opt.cores = f->cores;
    opt.executable = own_executable();
    opt.stop_requested = [] { return g_stop.load(); };
    opt.on_event = [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C ends the sweep at once (its trials die with it)
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    auto result = experiment::run_sweep(*spec, opt);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (!result.is_ok()) {
      const bool usage = result.status().code() == StatusCode::invalid_argument;
      std::fprintf(stderr, "mixprec: %s: %s\n", usage ? "usage error" : "error", result.status().message().c_str());
      return exit_code_for(result.status());
    }
    const experiment::SweepResult& r = *result;
    print_table(*spec, r);
    std::string resume = program_name() + " sweep " + shell_word(f->file) + " --experiment-dir " + shell_word(r.dir) +
                         " --resume";
    if (r.interrupted) {
      std::printf("interrupted; the trials saved checkpoints. Resume with:\n  %s\n", resume.c_str());
      return kExitInterrupted;
    }
    if (r.best < 0) {
      std::fprintf(stderr, "mixprec: error: no trial of experiment %s has a %s (every trial failed?)\n",
                   spec->name.c_str(), spec->metric.c_str());
      return kExitRuntime;
    }
    const experiment::TrialRecord& best = r.state.trials[size_t(r.best - 1)];
    std::printf("best trial: %lld, %s %.4f after %lld steps; run directory %s/%s\n", (long long)best.id,
                spec->metric.c_str(), best.metrics.back(), (long long)best.steps, r.dir.c_str(), best.dir.c_str());
    std::string command;
    for (const std::string& a : experiment::reproduce_command(program_name(), r.dir, best, spec->ranks_per_trial))
      command += (command.empty() ? "" : " ") + shell_word(a);
    std::printf("reproduce it: %s\n", command.c_str());
    return kExitOk;
  };
}

}  // namespace mixprec::cli
