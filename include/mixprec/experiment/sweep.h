// sweep.h: running an experiment (`mixprec sweep`, docs/experiments.md). Each trial is an
// ordinary run directory under the experiment directory (trial-0001/, ...), trained by
// `mixprec train` as a child process; the experiment directory's experiment.json records every
// trial's state and is rewritten atomically after every change, so a sweep killed at any
// moment (kill -9 included) continues with --resume: no finished trial lost, none repeated,
// paused and promoted trials continued from their checkpoints.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "mixprec/experiment/experiment.h"
#include "mixprec/core/status.h"

namespace mixprec::experiment {

struct SweepOptions {
  std::string experiment_dir;  // "": experiments/<name>
  bool resume = false;         // continue the experiment in experiment_dir
  std::string executable;      // the mixprec binary the trials run (`<executable> train ...`)
  int cores = 0;               // cores to share among the trials (0: those this process may use)
  std::function<bool()> stop_requested;                   // polled; true: stop the trials with checkpoints
  std::function<void(const std::string& line)> on_event;  // one progress line per event
};

struct SweepResult {
  ExperimentState state;
  std::string dir;            // the experiment directory
  int64_t best = -1;          // the best trial's id (-1: no trial has a metric)
  bool interrupted = false;   // stop_requested: trials saved checkpoints; --resume continues
  int concurrent = 1;         // trials at once
  int threads_per_trial = 1;  // --threads of each rank (concurrent x ranks x threads <= cores)
  int ranks_per_trial = 1;    // > 1: each trial ran as `mpirun -np N mixprec train ...`
};

// What `mixprec train` would refuse of the base and of each hyperparameter's values (its
// constants and choices, a range's two ends) on top of the base: invalid_argument naming the
// file position, the hyperparameter and the value. run_sweep checks it before starting.
Status check_trial_settings(const ExperimentSpec& spec);

// Errors: invalid_argument (check_trial_settings; a state file without --resume, --resume without one, or a resume
// with an experiment file that differs from the one the sweep started with), busy (another
// sweep holds the directory), io_error, data_loss (a damaged state file).
StatusOr<SweepResult> run_sweep(const ExperimentSpec& spec, const SweepOptions& options);

// "3 done, 1 running, 2 stopped early, 0 failed of 8 | best trial 2: accuracy 0.9312"
std::string progress_text(const ExperimentSpec& spec, const ExperimentState& state);
// The command that trains trial t again from scratch, as one run: its own config.json (the
// base and its hyperparameters) and the steps it trained, under `mpirun -np N` for a
// data-parallel trial. The arguments, unquoted.
std::vector<std::string> reproduce_command(const std::string& program, const std::string& experiment_dir,
                                           const TrialRecord& t, int64_t ranks_per_trial = 1);

}  // namespace mixprec::experiment
