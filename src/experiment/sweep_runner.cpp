// sweep_runner.cpp: run_sweep (sweep.h): the loop that starts trials as `mixprec train`
// children, up to the concurrency the cores allow, records each change in experiment.json
// before acting on it, and asks the searcher (next_decision) what to run whenever a slot is
// free. Every decision is a function of the recorded trials, so a resume continues the
// sweep as if it had never stopped.
// Long because the loop is one class whose steps (slots, launch under mpirun or not, reap,
// budgets, finish, collect) read and write the same recorded state in a fixed order; split
// across files, each would take the whole state as a parameter.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "experiment/checkpoint_gc.h"
#include "experiment/child_process.h"
#include "io/atomic_file.h"
#include "mixprec/io/files.h"
#include "mixprec/io/run_dir.h"
#include "mixprec/experiment/sweep.h"
#include "mixprec/train/train_config.h"

namespace mixprec::experiment {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kStateFile = "experiment.json";

Status write_atomically(const std::string& path, const std::string& text) {
  auto w = io::AtomicFileWriter::create(path);
  if (!w.is_ok()) return w.status();
  MIXPREC_RETURN_IF_ERROR((*w)->write(text.data(), text.size()));
  return (*w)->commit();
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string metric_text(double v) {
  if (std::isnan(v)) return "none";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// "lr=0.001 optimizer=sgd": JSON texts as the table shows them, strings without quotes.
std::string values_text(const Assignment& a) {
  std::string s;
  for (const auto& [k, v] : a) {
    const bool text = v.size() >= 2 && v.front() == '"' && v.back() == '"';
    s += (s.empty() ? "" : " ") + k + "=" + (text ? v.substr(1, v.size() - 2) : v);
  }
  return s;
}

struct Running {
  size_t trial = 0;
  Clock::time_point started;
  bool budget_signalled = false;
};

class Sweep {
 public:
  Sweep(const ExperimentSpec& spec, const SweepOptions& opt) : spec_(spec), opt_(opt) {}

  StatusOr<SweepResult> run() {
    MIXPREC_RETURN_IF_ERROR(open());
    const int cores = opt_.cores > 0 ? opt_.cores : available_cores();
    // A trial holds ranks x threads cores: trials at once and threads are chosen so that all
    // of them together never ask for more than `cores`, and a trial with more ranks than
    // there are cores is refused rather than oversubscribed.
    const int ranks = int(spec_.ranks_per_trial);
    if (ranks > cores)
      return Status::invalid_argument(spec_.source + ": ranks_per_trial " + std::to_string(ranks) + " is more than the " +
                                      std::to_string(cores) + " core(s) this sweep may use (--cores): each rank needs "
                                      "a core of its own; lower ranks_per_trial or give the sweep more cores");
    if (ranks > 1) MIXPREC_RETURN_IF_ERROR(find_mpirun());
    result_.ranks_per_trial = ranks;
    result_.concurrent = int(std::min<int64_t>(spec_.max_concurrent_trials, cores / ranks));
    result_.threads_per_trial = std::max(1, cores / (result_.concurrent * ranks));
    auto base = train::config_from_json(spec_.base_json);
    if (base.is_ok() && base->threads > 0) result_.threads_per_trial = std::min(result_.threads_per_trial, base->threads);
    event("experiment " + spec_.name + " in " + dir_ + ": " + std::to_string(result_.concurrent) +
          " trial(s) at once, " + (ranks > 1 ? std::to_string(ranks) + " ranks x " : std::string()) +
          std::to_string(result_.threads_per_trial) + " thread(s) each (" + std::to_string(cores) + " cores)");
    bool stopping = false;
    for (;;) {
      if (!stopping && opt_.stop_requested && opt_.stop_requested()) {
        stopping = true;
        event("stopping: each running trial saves a checkpoint; --resume continues");
        for (auto& [pid, r] : running_) ::kill(pid, stop_signal());
      }
      if (!stopping) MIXPREC_RETURN_IF_ERROR(fill_slots());
      if (running_.empty()) break;
      MIXPREC_RETURN_IF_ERROR(reap());
    }
    result_.interrupted = stopping;
    state_.status = stopping ? "interrupted" : "finished";
    if (!stopping)
      for (TrialRecord& t : state_.trials)
        if (t.state == "paused") t.state = "stopped";  // ASHA did not promote it: stopped early
    result_.best = best_trial(state_, spec_.smaller_is_better);
    for (size_t i = 0; i < state_.trials.size(); ++i) collect(i);
    MIXPREC_RETURN_IF_ERROR(save());
    result_.state = state_;
    result_.dir = dir_;
    return result_;
  }

 private:
  std::string trial_dir(const TrialRecord& t) const { return dir_ + "/" + t.dir; }

  // mpirun, for data-parallel trials: MIXPREC_MPIRUN, else the first on PATH.
  Status find_mpirun() {
    const char* given = std::getenv("MIXPREC_MPIRUN");
    mpirun_ = given && *given ? std::string(given) : find_on_path("mpirun");
    if (!mpirun_.empty() && ::access(mpirun_.c_str(), X_OK) == 0) return Status::ok();
    return Status::invalid_argument(spec_.source + ": ranks_per_trial " + std::to_string(spec_.ranks_per_trial) +
                                    " runs each trial under mpirun, and " +
                                    (given && *given ? "MIXPREC_MPIRUN='" + mpirun_ + "' is not an executable file"
                                                     : std::string("no mpirun is on PATH (OpenMPI: scripts/setup installs "
                                                                   "openmpi-bin; or set MIXPREC_MPIRUN)")));
  }

  // How a trial is told to stop after its current step with a checkpoint: SIGINT for
  // `mixprec train` itself; mpirun ends its ranks at once on SIGINT but forwards SIGUSR1 to
  // every rank, which all stop after the same step (docs/distributed.md).
  int stop_signal() const { return spec_.ranks_per_trial > 1 ? SIGUSR1 : SIGINT; }

  void event(const std::string& line) {
    if (opt_.on_event) opt_.on_event(line);
  }

  Status save() { return write_atomically(dir_ + "/" + kStateFile, state_to_json(state_)); }

  Status open() {
    dir_ = opt_.experiment_dir.empty() ? "experiments/" + spec_.name : opt_.experiment_dir;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) return Status::io_error("cannot create experiment directory '" + dir_ + "': " + ec.message());
    // One sweep per experiment directory, by the same lock a run directory has (run_dir.h).
    auto lock = RunDirLock::acquire(dir_);
    if (!lock.is_ok()) return lock.status();
    lock_ = std::move(lock).value();
    const std::string path = dir_ + "/" + kStateFile;
    const bool exists = fs::exists(path, ec);
    if (exists && !opt_.resume)
      return Status::invalid_argument("experiment directory '" + dir_ + "' already holds an experiment (" + path +
                                      "): pass --resume to continue it, or choose another --experiment-dir");
    if (!exists && opt_.resume)
      return Status::invalid_argument("--resume: '" + path + "' does not exist: there is no sweep to continue there");
    if (!exists) {
      state_.name = spec_.name;
      state_.spec_json = spec_to_json(spec_);
      return save();
    }
    auto text = io::read_regular_file(path, "experiment state", uint64_t(64) << 20);
    if (!text.is_ok()) return text.status();
    auto state = state_from_json(*text, path);
    if (!state.is_ok()) return state.status();
    state_ = std::move(state).value();
    if (state_.spec_json != spec_to_json(spec_))
      return Status::invalid_argument(spec_.source + ": differs from the experiment the sweep in '" + dir_ +
                                      "' started with (its settings are in " + path +
                                      " under \"experiment\"): resume with the same file (max_concurrent_trials may "
                                      "change), or start a new experiment in another --experiment-dir");
    int64_t continued = 0;
    for (TrialRecord& t : state_.trials)
      if (t.state == "running") {  // the sweep died under it: run it again, from its checkpoint if it has one
        t.state = "pending";
        ++continued;
      }
    state_.status = "running";
    event("resuming: " + std::to_string(state_.trials.size()) + " trial(s) recorded, " + std::to_string(continued) +
          " to continue");
    return save();
  }

  std::vector<TrialView> views() const {
    std::vector<TrialView> v;
    for (const TrialRecord& t : state_.trials)
      v.push_back({t.id, int(t.metrics.size()), t.metrics, t.state == "running" || t.state == "pending",
                   t.state == "failed" || t.state == "stopped" || t.state == "completed"});
    return v;
  }

  // Starts trials while there are free slots: first those recorded as pending (retries, or
  // cut short by a stop or a kill), then what the searcher decides.
  Status fill_slots() {
    while (int(running_.size()) < result_.concurrent) {
      size_t next = state_.trials.size();
      for (size_t i = 0; i < state_.trials.size() && next == state_.trials.size(); ++i)
        if (state_.trials[i].state == "pending") next = i;
      if (next == state_.trials.size()) {
        const Decision d = next_decision(spec_.searcher, spec_.smaller_is_better, views(),
                                         spec_.searcher.max_trials - int64_t(state_.trials.size()));
        if (d.kind == Decision::Kind::wait || d.kind == Decision::Kind::done) return Status::ok();
        if (d.kind == Decision::Kind::promote) {
          next = size_t(d.trial - 1);
          state_.trials[next].target_rung = d.rung;
        } else {
          MIXPREC_RETURN_IF_ERROR(create_trial());
          next = state_.trials.size() - 1;
        }
      }
      MIXPREC_RETURN_IF_ERROR(launch(next));
    }
    return Status::ok();
  }

  Status create_trial() {
    TrialRecord t;
    t.id = int64_t(state_.trials.size()) + 1;
    char name[32];
    std::snprintf(name, sizeof name, "trial-%04lld", (long long)t.id);
    t.dir = name;
    if (spec_.searcher.kind == Searcher::Kind::grid) {
      if (grid_.empty()) grid_ = grid_points(spec_.hyperparameters);
      t.hyperparameters = grid_.at(size_t(t.id - 1));
    } else {
      t.hyperparameters = random_point(spec_.hyperparameters, spec_.searcher.seed, t.id - 1);
    }
    auto config = trial_config_json(spec_, t.hyperparameters);
    if (!config.is_ok()) return config.status();
    std::error_code ec;
    fs::create_directories(trial_dir(t), ec);
    if (ec) return Status::io_error("cannot create trial directory '" + trial_dir(t) + "': " + ec.message());
    // The trial's own settings, which its `mixprec train --config` reads. A kill before the
    // state records the trial leaves this behind; the resume makes the same trial again.
    MIXPREC_RETURN_IF_ERROR(write_atomically(trial_dir(t) + "/trial.json", *config + "\n"));
    state_.trials.push_back(std::move(t));
    return Status::ok();
  }

  Status launch(size_t index) {
    TrialRecord& t = state_.trials[index];
    const std::string dir = trial_dir(t);
    const int64_t steps = spec_.searcher.rung_steps[size_t(t.target_rung)];
    std::error_code ec;
    const bool has_checkpoint = fs::exists(dir + "/last.json", ec);
    std::vector<std::string> argv;
    if (spec_.ranks_per_trial > 1) {
      // One data-parallel job per trial. Unbound (--bind-to none): mpirun would bind every
      // job's rank 0 to the same core, while the sweep has already divided the cores among
      // the trials; --oversubscribe because mpirun counts its slots in its own way, which
      // may be fewer than the cores given to the sweep. Root needs its explicit consent.
      argv = {mpirun_, "-np", std::to_string(spec_.ranks_per_trial), "--oversubscribe", "--bind-to", "none"};
      if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    }
    argv.insert(argv.end(), {opt_.executable, "train"});
    if (has_checkpoint) argv.insert(argv.end(), {"--resume", dir});
    else argv.insert(argv.end(), {"--config", dir + "/trial.json", "--run-dir", dir, "--overwrite"});
    // Checkpoints are the sweep's to collect (by the experiment's metric, collect_checkpoints):
    // train's own pruning by age (--keep-checkpoints) could delete the one the metric keeps.
    argv.insert(argv.end(), {"--max-steps", std::to_string(steps), "--threads", std::to_string(result_.threads_per_trial),
                             "--keep-checkpoints", "0"});
    const bool promoted = !t.metrics.empty();
    t.state = "running";
    MIXPREC_RETURN_IF_ERROR(save());  // recorded before it starts: a kill now reruns it
    if (!wait_for_run_lock(dir, 60.0))
      event("trial " + std::to_string(t.id) + ": its run directory is still locked by another process");
    {
      std::string header = "\n=== mixprec sweep:";
      for (const std::string& a : argv) header += " " + a;
      std::FILE* log = std::fopen((dir + "/train.log").c_str(), "a");
      if (log) std::fprintf(log, "%s\n", header.c_str()), std::fclose(log);
    }
    auto pid = start_child(argv, dir + "/train.log");
    if (!pid.is_ok()) return pid.status();
    running_[*pid] = {index, Clock::now(), false};
    event("trial " + std::to_string(t.id) + (promoted ? " promoted to rung " + std::to_string(t.target_rung) : " started") +
          " (" + (steps > 0 ? "to step " + std::to_string(steps) : std::string("the recipe's epochs")) + "): " +
          values_text(t.hyperparameters));
    return Status::ok();
  }

  // Waits a little for a trial to end; enforces the time budget meanwhile.
  Status reap() {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      const auto now = Clock::now();
      for (auto& [p, r] : running_) {
        const TrialRecord& t = state_.trials[r.trial];
        const double used = t.seconds + std::chrono::duration<double>(now - r.started).count();
        if (spec_.max_seconds > 0 && used > spec_.max_seconds && !r.budget_signalled) {
          ::kill(p, stop_signal());  // it stops after its current step, with a checkpoint
          r.budget_signalled = true;
        }
      }
      // nanosleep, not sleep_for: a signal (Ctrl-C) ends the wait at once instead of being
      // slept through, so the trials are told to stop without delay.
      const timespec pause{0, 50'000'000};
      ::nanosleep(&pause, nullptr);
      return Status::ok();
    }
    auto it = running_.find(pid);
    if (it == running_.end()) return Status::ok();
    const Running r = it->second;
    running_.erase(it);
    return finished(r, status);
  }

  Status finished(const Running& r, int status) {
    TrialRecord& t = state_.trials[r.trial];
    t.seconds += std::chrono::duration<double>(Clock::now() - r.started).count();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const int64_t target = spec_.searcher.rung_steps[size_t(t.target_rung)];
    const std::string dir = trial_dir(t);
    // What the run logged: its last step, and the metric at the rung's step (the last
    // evaluation at or before it).
    double metric = NAN;
    int64_t steps = 0;
    if (auto m = read_metrics(dir + "/metrics.jsonl"); m.is_ok())
      for (const MetricsRecord& rec : m->records) {
        if (rec.kind == MetricsRecord::Kind::step) steps = std::max(steps, rec.step);
        if (rec.kind == MetricsRecord::Kind::eval && (target < 0 || rec.step <= target))
          metric = spec_.metric == "loss" ? rec.loss : rec.accuracy;
      }
    t.steps = steps;
    const std::string who = "trial " + std::to_string(t.id);
    if (r.budget_signalled && (code == 0 || code == 130)) {
      t.state = "stopped";
      t.error = "time budget of " + train::number_text(spec_.max_seconds) + " s used up at step " + std::to_string(steps);
      t.metrics.resize(size_t(t.target_rung));
      if (!std::isnan(metric)) t.metrics.push_back(metric);
      event(who + ": " + t.error);
    } else if (code == 130) {
      t.state = "pending";  // stopped by the sweep's Ctrl-C: continues on --resume
      event(who + ": stopped at step " + std::to_string(steps) + " with a checkpoint");
    } else if (code == 0) {
      t.metrics.resize(size_t(t.target_rung));
      t.metrics.push_back(metric);
      const bool top = t.target_rung + 1 == int(spec_.searcher.rung_steps.size());
      const bool ran_out = target > 0 && steps < target;  // the recipe's epochs ended it first
      t.state = top || ran_out ? "completed" : "paused";
      event(who + " rung " + std::to_string(t.target_rung) + " done at step " + std::to_string(steps) + ": " +
            spec_.metric + " " + metric_text(metric) + " (" + t.state + ")");
    } else {
      ++t.restarts;
      const std::string log = tail_lines(dir + "/train.log", 5);
      if (t.restarts > spec_.max_restarts) {
        t.state = "failed";
        t.error = "exit code " + std::to_string(code) + ": " + log;
        event(who + " failed (exit code " + std::to_string(code) + ", after " + std::to_string(t.restarts - 1) +
              " restart(s)); its log ends:\n" + log);
      } else {
        t.state = "pending";
        event(who + " failed (exit code " + std::to_string(code) + "); restart " + std::to_string(t.restarts) + " of " +
              std::to_string(spec_.max_restarts));
      }
    }
    MIXPREC_RETURN_IF_ERROR(save());
    collect(r.trial);
    event(progress_text(spec_, state_));
    return Status::ok();
  }

  // Checkpoint garbage collection of a trial that is not training (checkpoint_gc.h). The
  // newest checkpoint stays while the trial may train on, and for the best trial.
  void collect(size_t index) {
    const TrialRecord& t = state_.trials[index];
    if (t.state == "running") return;
    const bool may_continue = t.state == "paused" || t.state == "pending";
    const bool best = best_trial(state_, spec_.smaller_is_better) == t.id;
    auto gc = collect_checkpoints(trial_dir(t), spec_.metric, spec_.smaller_is_better, spec_.keep_checkpoints,
                                  may_continue || best);
    if (!gc.is_ok()) event("trial " + std::to_string(t.id) + ": checkpoint clean-up: " + gc.status().message());
  }

  const ExperimentSpec& spec_;
  const SweepOptions& opt_;
  std::string dir_;
  std::unique_ptr<RunDirLock> lock_;
  std::string mpirun_;  // ranks_per_trial > 1: the mpirun every trial starts under
  ExperimentState state_;
  SweepResult result_;
  std::vector<Assignment> grid_;
  std::map<pid_t, Running> running_;
};

}  // namespace

StatusOr<SweepResult> run_sweep(const ExperimentSpec& spec, const SweepOptions& options) {
  if (options.executable.empty()) return Status::invalid_argument("run_sweep: no mixprec executable given");
  MIXPREC_RETURN_IF_ERROR(check_trial_settings(spec));
  return Sweep(spec, options).run();
}

std::string progress_text(const ExperimentSpec& spec, const ExperimentState& state) {
  std::map<std::string, int> n;
  for (const TrialRecord& t : state.trials) ++n[t.state];
  std::string s = std::to_string(n["completed"]) + " done, " + std::to_string(n["running"]) + " running, " +
                  std::to_string(n["paused"]) + " paused, " + std::to_string(n["stopped"]) + " stopped early, " +
                  std::to_string(n["failed"]) + " failed of " + std::to_string(spec.searcher.max_trials);
  const int64_t best = best_trial(state, spec.smaller_is_better);
  if (best > 0)
    s += " | best trial " + std::to_string(best) + ": " + spec.metric + " " +
         metric_text(state.trials[size_t(best - 1)].metrics.back());
  return s;
}

std::vector<std::string> reproduce_command(const std::string& program, const std::string& experiment_dir,
                                           const TrialRecord& t, int64_t ranks_per_trial) {
  std::vector<std::string> argv;
  if (ranks_per_trial > 1) argv = {"mpirun", "-np", std::to_string(ranks_per_trial)};
  argv.insert(argv.end(), {program, "train", "--config", experiment_dir + "/" + t.dir + "/config.json", "--max-steps",
                           std::to_string(t.steps)});
  return argv;
}

}  // namespace mixprec::experiment
