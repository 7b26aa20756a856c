// experiment_file_test.cpp: the experiment file (mixprec/experiment/experiment.h parse_experiment): a
// complete file read into the spec it says, recipes under base, ASHA's rungs from min_steps or
// rungs, and each kind of bad input refused as invalid_argument naming file:line:column, the
// key and the expected value (docs/experiments.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mixprec/experiment/experiment.h"

namespace mixprec::experiment {
namespace {

const char* kComplete = R"(name: lr-sweep
base:
  recipe: recipes/small.yaml
  dataset: synthetic
  batch_size: 64
hyperparameters:
  lr: {type: log, min: 1.0e-4, max: 1.0e-1, count: 4}
  weight_decay: {type: double, min: 0, max: 0.1}
  warmup_steps: {type: int, min: 0, max: 10}
  optimizer: {type: categorical, values: [adam, sgd]}
  precision: fp32
searcher:
  name: asha
  max_trials: 16
  reduction_factor: 2
  min_steps: 4
  seed: 7
max_steps: 32
max_concurrent_trials: 2
metric: loss
max_seconds: 600
max_restarts: 2
keep_checkpoints: 3
)";

StatusOr<std::string> recipe(const std::string& path) {
  if (path == "recipes/small.yaml") return std::string("model: cnn\nbatch_size: 128\nepochs: 3\n");
  return Status::not_found("no recipe '" + path + "'");
}

TEST(ExperimentFile, CompleteFileGivesTheSpecItSays) {
  auto s = parse_experiment(kComplete, "exp.yaml", recipe);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->name, "lr-sweep");
  // The recipe, then base's keys over it (batch_size 64 wins over the recipe's 128).
  const auto base = nlohmann::json::parse(s->base_json);
  EXPECT_EQ(base, nlohmann::json::parse(R"({"model": "cnn", "batch_size": 64, "epochs": 3, "dataset": "synthetic"})"));
  ASSERT_EQ(s->hyperparameters.size(), 5u);
  const Hyperparameter& lr = s->hyperparameters[0];
  EXPECT_EQ(lr.name, "lr");
  EXPECT_EQ(lr.kind, Hyperparameter::Kind::log_range);
  EXPECT_EQ(lr.min, 1e-4);
  EXPECT_EQ(lr.max, 1e-1);
  EXPECT_EQ(lr.count, 4);
  EXPECT_EQ(lr.where, "exp.yaml:7:7");
  EXPECT_EQ(s->hyperparameters[1].kind, Hyperparameter::Kind::double_range);
  EXPECT_EQ(s->hyperparameters[2].kind, Hyperparameter::Kind::int_range);
  EXPECT_EQ(s->hyperparameters[3].kind, Hyperparameter::Kind::categorical);
  EXPECT_EQ(s->hyperparameters[3].values, (std::vector<std::string>{"\"adam\"", "\"sgd\""}));
  EXPECT_EQ(s->hyperparameters[4].kind, Hyperparameter::Kind::constant);
  EXPECT_EQ(s->hyperparameters[4].values, (std::vector<std::string>{"\"fp32\""}));
  EXPECT_EQ(s->searcher.kind, Searcher::Kind::asha);
  EXPECT_EQ(s->searcher.max_trials, 16);
  EXPECT_EQ(s->searcher.seed, 7u);
  EXPECT_EQ(s->searcher.reduction_factor, 2);
  EXPECT_EQ(s->searcher.rung_steps, (std::vector<int64_t>{4, 8, 16, 32}));  // 4 * 2^k up to 32
  EXPECT_EQ(s->max_steps, 32);
  EXPECT_EQ(s->max_concurrent_trials, 2);
  EXPECT_EQ(s->metric, "loss");
  EXPECT_TRUE(s->smaller_is_better);  // the default for a loss
  EXPECT_EQ(s->max_seconds, 600.0);
  EXPECT_EQ(s->max_restarts, 2);
  EXPECT_EQ(s->keep_checkpoints, 3);
}

TEST(ExperimentFile, DefaultsAndTheOtherSearchers) {
  auto s = parse_experiment("name: a\nsearcher: {name: random, max_trials: 3}\n", "a.yaml");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->metric, "accuracy");
  EXPECT_FALSE(s->smaller_is_better);  // accuracy: larger is better
  EXPECT_EQ(s->max_concurrent_trials, 1);
  EXPECT_EQ(s->ranks_per_trial, 1);  // one process per trial
  EXPECT_EQ(spec_to_json(*s).find("ranks_per_trial"), std::string::npos);  // older state files compare equal
  auto dp = parse_experiment("name: a\nsearcher: {name: random, max_trials: 3}\nranks_per_trial: 4\n", "a.yaml");
  ASSERT_TRUE(dp.is_ok()) << dp.status().message();
  EXPECT_EQ(dp->ranks_per_trial, 4);
  EXPECT_NE(spec_to_json(*dp).find("\"ranks_per_trial\":4"), std::string::npos);  // a resume must keep it
  EXPECT_EQ(s->max_restarts, 0);
  EXPECT_EQ(s->keep_checkpoints, 1);
  EXPECT_EQ(s->searcher.rung_steps, (std::vector<int64_t>{-1}));  // the recipe's epochs
  EXPECT_EQ(s->base_json, "{}");
  // ASHA with rungs: min_steps = 64 / 4^2 = 4; rungs 4, 16, 64.
  auto a = parse_experiment("name: a\nmax_steps: 64\nsearcher: {name: asha, max_trials: 9, rungs: 3}\n", "a.yaml");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->searcher.rung_steps, (std::vector<int64_t>{4, 16, 64}));
  EXPECT_EQ(a->searcher.reduction_factor, 4);
  // A max_steps off the geometric sequence: the top rung is the last one within it.
  auto b = parse_experiment("name: a\nsearcher: {name: asha, max_trials: 9, min_steps: 3, max_steps: 50}\n", "a.yaml");
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->searcher.rung_steps, (std::vector<int64_t>{3, 12, 48}));
  // Grid: as many trials as points; JSON is read too.
  auto g = parse_experiment(R"({"name": "g", "max_steps": 5, "hyperparameters": {"lr": {"type": "double", "min": 0.1,
      "max": 0.3, "count": 3}, "optimizer": {"type": "categorical", "values": ["adam", "sgd"]}},
      "searcher": {"name": "grid"}})", "g.json");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->searcher.max_trials, 6);
  EXPECT_EQ(g->searcher.rung_steps, (std::vector<int64_t>{5}));
}

TEST(ExperimentFile, TrialConfigIsTheBaseWithTheValues) {
  auto s = parse_experiment(kComplete, "exp.yaml", recipe);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  auto c = trial_config_json(*s, {{"lr", "0.01"}, {"optimizer", "\"sgd\""}, {"batch_size", "32"}});
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(nlohmann::json::parse(*c), nlohmann::json::parse(R"({"model": "cnn", "batch_size": 32, "epochs": 3,
      "dataset": "synthetic", "lr": 0.01, "optimizer": "sgd"})"));
}

struct Bad {
  const char* text;
  std::vector<const char*> says;  // each must appear in the message
};

TEST(ExperimentFile, BadInputIsRefusedNamingPositionKeyAndExpectation) {
  const std::string ok_searcher = "searcher: {name: random, max_trials: 2}\n";
  const std::vector<Bad> cases = {
      {"- a\n- b\n", {"bad.yaml", "expected a mapping"}},
      {"name: x\n  oops: [\n", {"bad.yaml:"}},
      {"searcher: {name: random, max_trials: 2}\n", {"bad.yaml:", "name: expected the experiment's name"}},
      {"name: ../up\n", {"bad.yaml:1:7", "name:", "letters, digits"}},
      {"name: x\nmax_concurent_trials: 2\n", {"bad.yaml:2:23", "max_concurent_trials", "did you mean 'max_concurrent_trials'"}},
      {"name: x\nhyperparameters:\n  lrr: 0.1\n", {"bad.yaml:3:8", "hyperparameters.lrr", "not a setting", "did you mean 'lr'"}},
      {"name: x\nbase: {optimiser: sgd}\n", {"bad.yaml:2:19", "base.optimiser", "did you mean 'optimizer'"}},
      {"name: x\nbase: {lr: -1}\n", {"bad.yaml:2:12", "base.lr", "must be > 0, got -1"}},
      {"name: x\nbase: {evaluate: false}\n", {"base.evaluate", "must be true"}},
      {"name: x\nbase: {recipe: r.yaml}\n", {"bad.yaml:2:16", "base.recipe", "cannot be read"}},
      {"name: x\nhyperparameters:\n  lr: {type: log, min: 0, max: 1}\n", {"bad.yaml:3:24", "hyperparameters.lr.min", "min > 0"}},
      {"name: x\nhyperparameters:\n  lr: {type: double, min: 0.5, max: 0.1}\n", {"hyperparameters.lr.max", "must be >= min (0.5)"}},
      {"name: x\nhyperparameters:\n  lr: {type: dobule, min: 0, max: 1}\n", {"bad.yaml:3:14", "hyperparameters.lr.type", "expected int, double, log or categorical", "did you mean 'double'"}},
      {"name: x\nhyperparameters:\n  lr: {type: double, max: 1}\n", {"hyperparameters.lr", "missing 'min'"}},
      {"name: x\nhyperparameters:\n  lr: {type: double, min: 0, max: 1, step: 2}\n", {"hyperparameters.lr.step", "unknown key"}},
      {"name: x\nhyperparameters:\n  lr: {min: 0, max: 1}\n", {"hyperparameters.lr", "type: int, double, log or categorical"}},
      {"name: x\nhyperparameters:\n  lr: [0.1, 0.2]\n", {"hyperparameters.lr", "type: categorical"}},
      {"name: x\nhyperparameters:\n  batch_size: {type: log, min: 8, max: 64}\n", {"hyperparameters.batch_size.type", "takes integers: use type: int"}},
      {"name: x\nhyperparameters:\n  optimizer: {type: int, min: 0, max: 2}\n", {"hyperparameters.optimizer.type", "not a number"}},
      {"name: x\nhyperparameters:\n  batch_size: {type: int, min: 0.5, max: 64}\n", {"hyperparameters.batch_size.min", "expected an integer"}},
      {"name: x\nhyperparameters:\n  batch_size: {type: int, min: 0, max: 64}\n", {"hyperparameters.batch_size.min", "must be in [1, 16777216], got 0"}},
      {"name: x\nhyperparameters:\n  optimizer: {type: categorical, values: [adam, sgdd]}\n", {"bad.yaml:3:49", "values[1]", "expected one of: adam, adamw, sgd", "did you mean 'sgd'"}},
      {"name: x\nhyperparameters:\n  optimizer: {type: categorical, values: []}\n", {"hyperparameters.optimizer.values", "non-empty list"}},
      {"name: x\nhyperparameters:\n  max_steps: 10\n", {"hyperparameters.max_steps", "the sweep sets it"}},
      {"name: x\nhyperparameters:\n  epochs: two\n", {"hyperparameters.epochs", "wrong type"}},
      {"name: x\nhyperparameters:\n  threads: {type: int, min: 1, max: 2}\n", {"hyperparameters.threads", "divides the cores"}},
      {"name: x\nhyperparameters:\n  evaluate: false\n", {"hyperparameters.evaluate", "compared by their evaluation"}},
      {"name: x\n", {"searcher", "expected a mapping"}},
      {"name: x\nsearcher: {name: gird}\n", {"bad.yaml:2:18", "searcher.name", "got 'gird'", "did you mean 'grid'"}},
      {"name: x\nsearcher: {name: random}\n", {"searcher.max_trials", "missing"}},
      {"name: x\nsearcher: {name: random, max_trials: 0}\n", {"searcher.max_trials", "expected an integer in [1, 100000], got 0"}},
      {"name: x\nsearcher: {name: random, max_trials: 2, seed: -1}\n", {"searcher.seed", "[0, 2^64-1]"}},
      {"name: x\nsearcher: {name: random, max_trials: 2, rungs: 3}\n", {"searcher.rungs", "unknown key"}},
      {"name: x\nhyperparameters:\n  lr: {type: log, min: 0.001, max: 1}\nsearcher: {name: grid}\n", {"bad.yaml:3:7", "hyperparameters.lr", "needs count"}},
      {"name: x\nsearcher: {name: asha, max_trials: 4, min_steps: 2}\n", {"searcher", "per-trial budget"}},
      {"name: x\nmax_steps: 8\nsearcher: {name: asha, max_trials: 4}\n", {"searcher", "exactly one of rungs"}},
      {"name: x\nmax_steps: 8\nsearcher: {name: asha, max_trials: 4, rungs: 3}\n", {"searcher.rungs", "need max_steps >= 4^2; got 8"}},
      {"name: x\nmax_steps: 8\nsearcher: {name: asha, max_trials: 4, min_steps: 16}\n", {"searcher.min_steps", "[1, 8]"}},
      {"name: x\nmax_steps: 8\nsearcher: {name: asha, max_trials: 4, min_steps: 2, max_steps: 16}\n", {"searcher.max_steps", "differs"}},
      {"name: x\nmax_steps: 8\nsearcher: {name: asha, max_trials: 4, min_steps: 2, reduction_factor: 1}\n", {"searcher.reduction_factor", "[2, 100]"}},
      {"name: x\nmetric: acuracy\n", {"bad.yaml:2:9", "metric", "accuracy or loss", "did you mean 'accuracy'"}},
      {"name: x\nsmaller_is_better: yes please\n", {"smaller_is_better", "true or false"}},
      {"name: x\nmax_steps: 0\n", {"max_steps", "expected an integer in [1,"}},
      {"name: x\nmax_seconds: -5\n", {"max_seconds", "> 0"}},
      {"name: x\nmax_concurrent_trials: 0\n", {"max_concurrent_trials", "[1, 1024]"}},
      {"name: x\nmax_restarts: -1\n", {"max_restarts", "[0, 100]"}},
      {"name: x\nranks_per_trial: 0\n", {"bad.yaml:2:18", "ranks_per_trial", "[1, 1024]"}},
      {"name: x\nranks_per_trial: 1.5\n", {"ranks_per_trial", "expected an integer"}},
      {"name: x\nranks_per_trial: two\n", {"ranks_per_trial", "expected an integer"}},
      {"name: x\nrank_per_trial: 2\n", {"rank_per_trial", "did you mean 'ranks_per_trial'"}},
      {"name: x\nkeep_checkpoints: 0\n", {"keep_checkpoints", "[1, 1000]"}},
  };
  for (const Bad& c : cases) {
    // The searcher is appended where the case does not bring its own, so each case has one fault.
    std::string text = c.text;
    if (text.find("searcher") == std::string::npos && text != "name: x\n" && text.rfind("- a", 0) != 0) text += ok_searcher;
    auto s = parse_experiment(text, "bad.yaml", {});
    ASSERT_FALSE(s.is_ok()) << "accepted:\n" << text;
    EXPECT_EQ(s.status().code(), StatusCode::invalid_argument) << text;
    for (const char* piece : c.says) EXPECT_NE(s.status().message().find(piece), std::string::npos)
        << "message of\n" << text << "lacks '" << piece << "':\n" << s.status().message();
  }
}

TEST(ExperimentFile, RecipeProblemsNameTheRecipe) {
  auto missing = parse_experiment("name: x\nbase: {recipe: recipes/none.yaml}\nsearcher: {name: random, max_trials: 1}\n",
                                  "exp.yaml", recipe);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("exp.yaml:2:16: base.recipe: no recipe 'recipes/none.yaml'"), std::string::npos)
      << missing.status().message();
  auto bad_key = parse_experiment("name: x\nbase: {recipe: r.yaml}\nsearcher: {name: random, max_trials: 1}\n", "exp.yaml",
                                  [](const std::string&) -> StatusOr<std::string> { return std::string("lrr: 0.1\n"); });
  ASSERT_FALSE(bad_key.is_ok());
  EXPECT_NE(bad_key.status().message().find("r.yaml:1:6: 'lrr' is not a setting"), std::string::npos)
      << bad_key.status().message();
  auto owned = parse_experiment("name: x\nbase: {recipe: r.yaml}\nsearcher: {name: random, max_trials: 1}\n", "exp.yaml",
                                [](const std::string&) -> StatusOr<std::string> { return std::string("max_steps: 5\n"); });
  ASSERT_FALSE(owned.is_ok());
  EXPECT_NE(owned.status().message().find("max_steps"), std::string::npos) << owned.status().message();
}

// The example the docs show is one the sweep accepts, with the rungs they say.
TEST(ExperimentFile, ShippedExampleParses) {
  auto s = load_experiment(MIXPREC_SOURCE_DIR "/recipes/experiments/lr-asha.yaml");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->searcher.rung_steps, (std::vector<int64_t>{144, 576, 2304}));
  EXPECT_EQ(nlohmann::json::parse(s->base_json).value("optimizer", ""), "adamw");  // from the recipe
  EXPECT_EQ(s->hyperparameters.size(), 5u);
}

}  // namespace
}  // namespace mixprec::experiment
