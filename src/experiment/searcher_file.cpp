// searcher_file.cpp: the experiment file's `searcher:` mapping (file_reader.h): grid, random
// or asha, with ASHA's rungs worked out from min_steps or rungs and the per-trial max_steps.
#include <cstdint>
#include <limits>

#include "experiment/file_reader.h"

namespace mixprec::experiment {
namespace {

// More trials than any machine this runs on finishes; a larger number is a typo.
constexpr int64_t kMaxTrials = 100000;

// ASHA's rungs: min_steps * eta^k for k = 0, 1, ... while at most max_steps (Li et al.: rung k
// trains each of its trials to r * eta^k of the resource).
std::vector<int64_t> geometric_rungs(int64_t min_steps, int64_t eta, int64_t max_steps) {
  std::vector<int64_t> rungs;
  for (int64_t s = min_steps; s <= max_steps; s *= eta) {
    rungs.push_back(s);
    if (s > std::numeric_limits<int64_t>::max() / eta) break;
  }
  return rungs;
}

}  // namespace

Status read_searcher(const Reader& r, const json& doc, ExperimentSpec& spec) {
  if (!doc.contains("searcher") || !doc["searcher"].is_object())
    return r.error("/searcher", "searcher",
                   "expected a mapping: {name: grid}, {name: random, max_trials: N, seed: S} or {name: asha, "
                   "max_trials: N, min_steps: M} with the experiment's max_steps");
  const json& s = doc["searcher"];
  const std::vector<std::string> names = {"grid", "random", "asha"};
  const std::string name = s.contains("name") && s["name"].is_string() ? s["name"].get<std::string>() : "";
  if (name != "grid" && name != "random" && name != "asha")
    return r.error("/searcher/name", "searcher.name",
                   "expected grid, random or asha, got " +
                       (!s.contains("name") ? std::string("nothing") : "'" + (s["name"].is_string() ? name : s["name"].dump()).substr(0, 60) + "'") +
                       did_you_mean(name, names));
  Searcher& out = spec.searcher;
  if (name == "grid") {
    MIXPREC_RETURN_IF_ERROR(r.unknown_keys(s, "/searcher", "searcher.", {"name"}));
    out.kind = Searcher::Kind::grid;
    int64_t points = 1;
    for (const Hyperparameter& h : spec.hyperparameters) {
      const bool range = h.kind != Hyperparameter::Kind::constant && h.kind != Hyperparameter::Kind::categorical;
      if (range && h.count < 1)
        return Status::invalid_argument(h.where + ": hyperparameters." + h.name +
                                        ": the grid searcher needs count: N (the points it takes over the range)");
      points *= int64_t(grid_values(h).size());
      if (points > kMaxTrials)
        return r.error("/searcher", "searcher", "the grid has more than " + std::to_string(kMaxTrials) +
                                                    " points; lower the counts or use random");
    }
    out.max_trials = points;
    out.rung_steps = {spec.max_steps};
    return Status::ok();
  }
  if (name == "random") {
    MIXPREC_RETURN_IF_ERROR(r.unknown_keys(s, "/searcher", "searcher.", {"name", "max_trials", "seed"}));
    out.kind = Searcher::Kind::random;
  } else {
    MIXPREC_RETURN_IF_ERROR(r.unknown_keys(
        s, "/searcher", "searcher.", {"name", "max_trials", "seed", "reduction_factor", "rungs", "min_steps", "max_steps"}));
    out.kind = Searcher::Kind::asha;
  }
  if (!s.contains("max_trials")) return r.error("/searcher", "searcher.max_trials", "missing: how many trials to start");
  auto trials = r.integer(s, "/searcher", "max_trials", "searcher.max_trials", 1, kMaxTrials, 0);
  if (!trials.is_ok()) return trials.status();
  out.max_trials = *trials;
  if (s.contains("seed")) {
    const json& v = s["seed"];
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      return r.error("/searcher/seed", "searcher.seed", "expected an integer in [0, 2^64-1], got " + v.dump().substr(0, 60));
    out.seed = v.get<uint64_t>();
  }
  if (out.kind == Searcher::Kind::random) {
    out.rung_steps = {spec.max_steps};
    return Status::ok();
  }
  auto eta = r.integer(s, "/searcher", "reduction_factor", "searcher.reduction_factor", 2, 100, 4);
  if (!eta.is_ok()) return eta.status();
  out.reduction_factor = *eta;
  constexpr int64_t kMaxSteps = int64_t(1) << 40;
  auto budget = r.integer(s, "/searcher", "max_steps", "searcher.max_steps", 1, kMaxSteps, spec.max_steps);
  if (!budget.is_ok()) return budget.status();
  if (spec.max_steps > 0 && *budget != spec.max_steps)
    return r.error("/searcher/max_steps", "searcher.max_steps",
                   "differs from the experiment's max_steps (" + std::to_string(spec.max_steps) + "); give one");
  if (*budget < 1)
    return r.error("/searcher", "searcher",
                   "asha needs the per-trial budget: max_steps (the steps of the top rung), here or at the top level");
  spec.max_steps = *budget;
  const bool has_rungs = s.contains("rungs"), has_min = s.contains("min_steps");
  if (has_rungs == has_min)
    return r.error("/searcher", "searcher",
                   "asha needs exactly one of rungs: N (rung k trains to max_steps / eta^(N-1-k)) and min_steps: M "
                   "(rung k trains to M * eta^k)");
  int64_t min_steps = 0;
  if (has_rungs) {
    auto rungs = r.integer(s, "/searcher", "rungs", "searcher.rungs", 1, 40, 0);
    if (!rungs.is_ok()) return rungs.status();
    min_steps = spec.max_steps;
    for (int64_t k = 1; k < *rungs; ++k) min_steps /= out.reduction_factor;
    if (min_steps < 1)
      return r.error("/searcher/rungs", "searcher.rungs",
                     std::to_string(*rungs) + " rungs of reduction factor " + std::to_string(out.reduction_factor) +
                         " need max_steps >= " + std::to_string(out.reduction_factor) + "^" +
                         std::to_string(*rungs - 1) + "; got " + std::to_string(spec.max_steps));
  } else {
    auto m = r.integer(s, "/searcher", "min_steps", "searcher.min_steps", 1, spec.max_steps, 0);
    if (!m.is_ok()) return m.status();
    min_steps = *m;
  }
  out.rung_steps = geometric_rungs(min_steps, out.reduction_factor, spec.max_steps);
  return Status::ok();
}

}  // namespace mixprec::experiment
