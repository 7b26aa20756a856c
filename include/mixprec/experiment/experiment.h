// experiment.h: hyperparameter experiments (`mixprec sweep`, docs/experiments.md): the
// experiment file, the searchers that choose trials (grid, random, ASHA) and the experiment's
// state file. All of it is pure: parsing takes text, the searchers take the trials recorded
// so far and decide the next one, so each is tested against its definition without running
// anything. Running the trials is sweep.h's.
//
// Values of hyperparameters are kept as JSON texts ("0.001", "\"sgd\"", "64"): they go into a
// trial's configuration unchanged, and no public header depends on a JSON library.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::experiment {

struct Hyperparameter {
  enum class Kind : uint8_t { constant, int_range, double_range, log_range, categorical };
  std::string name;  // a config.json key ("lr")
  Kind kind = Kind::constant;
  std::vector<std::string> values;  // constant: one; categorical: the choices (JSON texts)
  double min = 0.0, max = 0.0;      // ranges, inclusive
  int64_t count = 0;                // grid: points over a range (linear, or geometric for log)
  std::string where;                // "exp.yaml:7:3", for messages
};

struct Searcher {
  enum class Kind : uint8_t { grid, random, asha };
  Kind kind = Kind::random;
  int64_t max_trials = 0;        // random, asha (grid: the number of grid points)
  uint64_t seed = 0;             // random, asha: trial i's values are a function of (seed, i)
  int64_t reduction_factor = 4;  // asha's eta
  // The steps a trial has trained when it completes each rung, ascending; grid and random
  // have one rung, the per-trial budget (max_steps, -1: the recipe's epochs).
  std::vector<int64_t> rung_steps;
};

struct ExperimentSpec {
  std::string name;
  std::string source;     // the file it came from
  std::string base_json;  // the base configuration: recipe, then base's keys (a JSON object)
  std::vector<Hyperparameter> hyperparameters;
  Searcher searcher;
  int64_t max_concurrent_trials = 1;
  // Each trial a data-parallel run of this many ranks (`mpirun -np N mixprec train ...`;
  // docs/experiments.md): a trial then uses N x its threads cores.
  int64_t ranks_per_trial = 1;
  std::string metric = "accuracy";  // a field of metrics.jsonl's eval records: accuracy, loss
  bool smaller_is_better = false;   // default: true for loss, false for accuracy
  int64_t max_steps = -1;           // per-trial budget in steps (-1: the recipe's epochs)
  double max_seconds = 0.0;         // per-trial budget in wall time (0: none)
  int64_t max_restarts = 0;         // retries of a failing trial before it is marked failed
  int64_t keep_checkpoints = 1;     // checkpoints kept per finished trial, best first
};

// Reads an experiment file (YAML, or JSON, which is YAML too). `read_recipe` reads the file a
// `base: {recipe: PATH}` names (PATH relative to the experiment file's folder, as the caller
// resolves it); without it a recipe is refused. Every refusal is invalid_argument naming
// source:line:column, the key and what was expected; a hyperparameter or base key that is not
// a setting gets "did you mean".
using RecipeReader = std::function<StatusOr<std::string>(const std::string& path)>;
StatusOr<ExperimentSpec> parse_experiment(std::string_view text, const std::string& source,
                                          const RecipeReader& read_recipe = {});
// parse_experiment of a file, reading recipes from disk relative to it.
StatusOr<ExperimentSpec> load_experiment(const std::string& path);
// The spec as canonical JSON (stored in the state file; a resume compares it).
std::string spec_to_json(const ExperimentSpec& spec);

// A trial's values, in the order of the file's hyperparameters: {name, JSON text}.
using Assignment = std::vector<std::pair<std::string, std::string>>;
// The points a grid takes over one hyperparameter: constants and categoricals their values;
// a range `count` points from min to max (evenly spaced; for log, evenly in log space; for
// int, rounded and without repeats).
std::vector<std::string> grid_values(const Hyperparameter& h);
// The whole grid, the cartesian product of grid_values in file order (the last hyperparameter
// varies fastest).
std::vector<Assignment> grid_points(const std::vector<Hyperparameter>& hs);
// Trial `index`'s random values: a function of (seed, index, the hyperparameter's position)
// alone, so a resume or a rerun draws the same trials. Ranges are uniform (int: each integer
// of [min, max] equally likely), log ranges uniform in log space, categoricals uniform.
Assignment random_point(const std::vector<Hyperparameter>& hs, uint64_t seed, int64_t index);
// The trial's configuration: the base with the values set (a JSON object for --config).
StatusOr<std::string> trial_config_json(const ExperimentSpec& spec, const Assignment& values);

// What the searchers see of a trial.
struct TrialView {
  int64_t id = 0;
  int rungs_done = 0;            // rungs completed (metrics.size())
  std::vector<double> metrics;   // the metric at the end of each completed rung (NaN: none)
  bool running = false;          // being trained now (to rung rungs_done)
  bool finished = false;         // failed, or stopped by its time budget: never promoted
};
struct Decision {
  enum class Kind : uint8_t { promote, start, wait, done };
  Kind kind = Kind::done;
  int64_t trial = 0;  // promote: this trial trains on to rung `rung`
  int rung = 0;
};
// The next job of asynchronous successive halving (Li et al. 2018, "A System for Massively
// Parallel Hyperparameter Tuning", Algorithm 2): from the highest rung down, the best trial
// that completed rung k, is among the top floor(n_k / eta) of the n_k trials that completed
// rung k, and was not promoted yet goes on to rung k + 1; else a new trial starts (while fewer
// than max_trials exist); else wait for a running trial, or done. Grid and random are the
// one-rung case (every trial starts, none is promoted). Ties go to the lower trial id; a
// missing metric (NaN) ranks last.
Decision next_decision(const Searcher& s, bool smaller_is_better, const std::vector<TrialView>& trials,
                       int64_t trials_to_create);
// Whether metric a is better than b (NaN is worse than anything).
bool better(double a, double b, bool smaller_is_better);

// The experiment directory's state file (experiment.json), rewritten atomically after every
// change. A dashboard reads it beside the trials' ordinary run directories.
struct TrialRecord {
  int64_t id = 0;
  std::string dir;  // "trial-0001", relative to the experiment directory
  Assignment hyperparameters;
  // pending (not started yet, or to run again), running, paused (a rung done; ASHA may
  // promote it), completed (trained its whole budget), stopped (early: ASHA did not promote
  // it, or its time budget ran out), failed (after max_restarts retries).
  std::string state = "pending";
  int target_rung = 0;          // the rung its current or next run trains to
  std::vector<double> metrics;  // per completed rung
  int64_t steps = 0;            // steps trained
  int64_t restarts = 0;
  double seconds = 0.0;         // wall time of its runs
  std::string error;            // failed: the last lines of its log
};
struct ExperimentState {
  std::string name;
  std::string spec_json;  // spec_to_json of the experiment it runs
  std::string status = "running";  // running, interrupted, finished
  std::vector<TrialRecord> trials;
};
std::string state_to_json(const ExperimentState& state);
StatusOr<ExperimentState> state_from_json(const std::string& text, const std::string& source);
// The best trial with a metric (its latest rung's value; among equal values the one that
// trained more, then the lower id), or -1 when none has one.
int64_t best_trial(const ExperimentState& state, bool smaller_is_better);

}  // namespace mixprec::experiment
