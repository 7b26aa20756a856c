// experiment_fuzz_target.h: the experiment_file fuzz target (tests/fuzz/experiment_file_fuzz.cpp;
// replayed by fuzz_corpus_replay_test), kept beside fuzz_targets.h, which includes it. The
// bytes are read as an experiment file (`mixprec sweep`'s input) and as an experiment state
// file (what `mixprec sweep --resume` acts on).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/experiment/experiment.h"
#include "mixprec/train/train_config.h"

namespace mixprec::fuzz {

// An accepted experiment is one the sweep can run: its rungs ascend (ASHA's by the reduction
// factor, within max_steps), a grid has max_trials points, and a trial's configuration (the
// first random point, or the first grid point) is accepted by `mixprec train --config`'s own
// reader, with every value in its field's range. Refusals are invalid_argument. The recipe
// under base is `r.yaml` (a small valid recipe); any other name is not found.
inline Violation experiment_file(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  using namespace experiment;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto read = [](const std::string& path) -> StatusOr<std::string> {
    if (path == "r.yaml") return std::string("model: cnn\nepochs: 3\nlr: 0.01\n");
    return Status::not_found("no recipe '" + path + "'");
  };
  auto spec = parse_experiment(text, "fuzz.yaml", read);
  set(accepted, spec.is_ok());
  if (!spec.is_ok()) {
    if (Violation v = expect_code(spec.status(), StatusCode::invalid_argument, "parse_experiment"); !v.empty()) return v;
  } else {
    const Searcher& s = spec->searcher;
    if (s.rung_steps.empty()) return "accepted a searcher without rungs";
    for (size_t i = 1; i < s.rung_steps.size(); ++i)
      if (s.rung_steps[i] != s.rung_steps[i - 1] * s.reduction_factor) return "rungs are not geometric";
    if (s.kind == Searcher::Kind::asha && (s.rung_steps.front() < 1 || s.rung_steps.back() > spec->max_steps))
      return "ASHA rungs outside [1, max_steps]";
    if (s.max_trials < 1) return "accepted max_trials < 1";
    Assignment first;
    if (s.kind == Searcher::Kind::grid) {
      if (s.max_trials <= 4096) {
        const std::vector<Assignment> points = grid_points(spec->hyperparameters);
        if (int64_t(points.size()) != s.max_trials) return "grid has a different number of points than max_trials";
        first = points.front();
      }
    } else {
      first = random_point(spec->hyperparameters, s.seed, 0);
    }
    auto config = trial_config_json(*spec, first);
    if (!config.is_ok()) return "trial_config_json refused an accepted experiment: " + config.status().message();
    auto c = train::apply_config_file(train::TrainConfig{}, *config, "trial.json", [](const std::string&) { return false; });
    if (!c.is_ok()) return "a trial's configuration is refused by --config: " + c.status().message();
    for (const train::ConfigField& f : train::config_fields())
      if (std::string problem = train::check_field(f, *c); !problem.empty())
        return "a trial's " + f.key + " is out of range: " + problem;
    if (nlohmann::json::parse(spec_to_json(*spec), nullptr, false).is_discarded()) return "spec_to_json is not JSON";
  }
  // The same bytes as a state file: refused as data_loss, or read back unchanged when written.
  auto state = state_from_json(text, "fuzz.json");
  if (!state.is_ok()) return expect_code(state.status(), StatusCode::data_loss, "state_from_json");
  auto again = state_from_json(state_to_json(*state), "fuzz.json");
  if (!again.is_ok()) return "a state written by state_to_json does not read back: " + again.status().message();
  if (state_to_json(*again) != state_to_json(*state)) return "a state changes on a round trip";
  return {};
}

}  // namespace mixprec::fuzz
