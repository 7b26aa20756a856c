// train_config_test.cpp: the table of settings (mixprec/train/train_config.h) and what walks it.
// Every row is unique and complete; every saved field survives config.json with a
// non-default value and no unsaved one is written; a field of the wrong type, or an integer
// out of its type's range, is invalid_argument naming the field; unknown keys are ignored;
// validate() refuses a value just past each row's bound naming its flag; adopt_saved_config
// takes the saved value unless the user gave the flag, and refuses a flag that changes a
// setting fixed on resume.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mixprec/train/train_config.h"

#include <cmath>
#include <set>

namespace mixprec::train {
namespace {

// Every serialised field set away from its default.
TrainConfig unusual() {
  TrainConfig c;
  c.model = "seed-cnn";
  c.dataset = "cifar10";
  c.data_dir = "/data/cifar";
  c.precision = "o2-bf16";
  c.epochs = 7;
  c.max_steps = 123;
  c.batch_size = 48;
  c.lr = 3.5e-4;
  c.lr_schedule = "cosine";
  c.warmup_steps = 10;
  c.min_lr = 1e-5;
  c.optimizer = "sgd";
  c.momentum = 0.8;
  c.weight_decay = 0.05;
  c.seed = 18446744073709551615ull;  // the largest seed survives exactly
  c.threads = 3;
  c.train_subset = 1000;
  c.test_subset = 200;
  c.shuffle = false;
  c.evaluate = false;
  c.init_scale = 1024;
  c.growth_factor = 4;
  c.backoff_factor = 0.25;
  c.growth_interval = 17;
  c.hysteresis = 3;
  c.min_scale = 1;
  c.clip_grad_norm = 2.5;
  c.accumulate = 4;
  c.workers = 2;
  c.eval_every = 50;
  c.save_every = 25;
  c.keep_checkpoints = 5;
  c.loss_spike_factor = 8;
  c.on_divergence = "rollback";
  c.max_rollbacks = 5;
  c.allreduce_dtype = "bf16";
  c.text_column = "review";
  c.max_tokens = 96;
  c.skip_bad = true;
  c.sync_bn = true;
  c.norm_mean = {0.4914, 0.4822, 0.4465};
  c.norm_std = {0.247, 0.243, 0.261};
  c.val_split = 0.2;
  c.input_channels = 3;
  c.input_height = 24;
  c.input_width = 20;
  c.num_classes = 4;
  c.class_names = {"cat", "dog", "new \"bird\"", "fish"};
  c.random_crop = 4;
  c.hflip = true;
  c.label_column = "species";
  c.feature_names = {"a", "b"};
  c.model_text = "layers: [flatten, {linear: {out: classes}}]\n";
  return c;
}

TEST(ConfigJson, EveryFieldRoundTrips) {
  const TrainConfig c = unusual();
  const std::string text = config_to_json(c);
  auto back = config_from_json(text);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  // Compared through the JSON of both, plus the fields a typo in the table would lose.
  EXPECT_EQ(config_to_json(*back), text);
  EXPECT_EQ(back->seed, c.seed);
  EXPECT_EQ(back->precision, "o2-bf16");
  EXPECT_EQ(back->norm_std, c.norm_std);
  EXPECT_FALSE(back->shuffle);
  // And every key of the JSON differs from the default config's value, so no field was skipped.
  const auto j = nlohmann::json::parse(text), d = nlohmann::json::parse(config_to_json(TrainConfig{}));
  for (const auto& [k, v] : j.items()) EXPECT_NE(v, d.at(k)) << "field '" << k << "' was not set away from its default";
}

TEST(ConfigJson, WrongTypesAndOutOfRangeIntegersNameTheField) {
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"lr": "fast"})", "lr"},
           {R"({"epochs": 1e300})", "epochs"},
           {R"({"threads": 4294967296})", "threads"},
           {R"({"seed": -1})", "seed"},
           {R"({"shuffle": 1})", "shuffle"},
           {R"({"norm_mean": [0.5, "x"]})", "norm_mean"}}) {
    SCOPED_TRACE(text);
    auto c = config_from_json(text);
    ASSERT_FALSE(c.is_ok());
    EXPECT_EQ(c.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(c.status().message().find("field '" + field + "'"), std::string::npos) << c.status().message();
  }
  for (const std::string& text : {std::string("[1, 2]"), std::string("not json"), std::string(100, '[')}) {
    auto c = config_from_json(text);
    EXPECT_FALSE(c.is_ok()) << text.substr(0, 20);
  }
}

TEST(ConfigJson, UnknownKeysAreIgnoredAndMissingKeysKeepDefaults) {
  auto c = config_from_json(R"({"lr": 0.5, "from_a_newer_version": {"x": 1}})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->lr, 0.5);
  EXPECT_EQ(c->batch_size, TrainConfig{}.batch_size);
}

TEST(ConfigJson, AdoptSavedConfigLetsGivenFlagsWin) {
  const std::string saved = config_to_json(unusual());
  TrainConfig given;  // defaults, except what the user typed
  given.max_steps = 999;
  auto merged = adopt_saved_config(given, saved, [](const std::string& key) { return key == "max_steps"; });
  ASSERT_TRUE(merged.is_ok()) << merged.status().message();
  EXPECT_EQ(merged->max_steps, 999);      // given on the command line: wins
  EXPECT_EQ(merged->batch_size, 48);      // from the saved run
  EXPECT_EQ(merged->precision, "o2-bf16");
  EXPECT_FALSE(adopt_saved_config(given, "{\"lr\": []}", [](const std::string&) { return false; }).is_ok());
}

TEST(ConfigTable, RowsAreUniqueNamedAndDocumented) {
  std::set<std::string> keys, flags;
  for (const ConfigField& f : config_fields()) {
    SCOPED_TRACE(f.key);
    EXPECT_TRUE(keys.insert(f.key).second) << "duplicate key";
    if (!f.flag.empty()) {
      EXPECT_TRUE(flags.insert(f.flag).second) << "duplicate flag";
      EXPECT_EQ(f.flag.rfind("--", 0), 0u);
    }
    EXPECT_FALSE(f.help.empty());
    EXPECT_EQ(find_config_field(f.key), &f);
    // The default configuration passes its own row's check.
    EXPECT_EQ(check_field(f, TrainConfig{}), "");
  }
  EXPECT_EQ(find_config_field("no_such_setting"), nullptr);
  EXPECT_GE(config_fields().size(), 35u);
}

TEST(ConfigTable, ExactlyTheSavedRowsAreWritten) {
  const auto j = nlohmann::json::parse(config_to_json(unusual()));
  for (const ConfigField& f : config_fields()) EXPECT_EQ(j.contains(f.key), f.saved) << f.key;
  EXPECT_EQ(j.size(), size_t(std::count_if(config_fields().begin(), config_fields().end(),
                                           [](const ConfigField& f) { return f.saved; })));
}

// A value just outside each numeric row's range is refused by validate(), naming the flag.
TEST(ConfigTable, ValidateRefusesJustPastEachBound) {
  int checked = 0;
  for (const ConfigField& f : config_fields()) {
    std::vector<double> outside;
    if (std::isfinite(f.min)) outside.push_back(f.min_open ? f.min : f.min - 1);
    if (std::isfinite(f.max)) outside.push_back(f.max_open ? f.max : f.max + 1);
    for (double v : outside) {
      TrainConfig c;
      c.run_dir = "runs/x";
      const bool numeric = std::visit(
          [&](auto member) {
            using T = std::decay_t<decltype(c.*member)>;
            if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
              c.*member = T(v);
              return true;
            }
            return false;
          },
          f.member);
      if (!numeric) continue;
      SCOPED_TRACE(f.key + " = " + std::to_string(v));
      const Status st = validate(c);
      ASSERT_FALSE(st.is_ok());
      const std::string name = f.flag.empty() ? "'" + f.key + "'" : f.flag;
      EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);  // the table has bounds to check
  // NaN and inf pass no bound.
  TrainConfig c;
  c.lr = std::nan("");
  EXPECT_NE(validate(c).message().find("--lr"), std::string::npos);
  c.lr = INFINITY;
  EXPECT_NE(validate(c).message().find("--lr"), std::string::npos);
  c = TrainConfig{};
  c.optimizer = "adamm";
  EXPECT_NE(validate(c).message().find("expected one of: adam, adamw, sgd"), std::string::npos);
}

TEST(ConfigTable, ResumeRefusesChangingAFixedSettingAndAllowsTheRest) {
  const std::string saved = config_to_json(unusual());  // trained as seed-cnn, o2-bf16, batch 48, ...
  TrainConfig given;
  given.precision = "fp32";
  auto refused = adopt_saved_config(given, saved, [](const std::string& key) { return key == "precision"; });
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("--precision: cannot change on --resume"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("'o2-bf16'"), std::string::npos);
  // The same value as the run's is no change.
  given.precision = "o2-bf16";
  EXPECT_TRUE(adopt_saved_config(given, saved, [](const std::string& key) { return key == "precision"; }).is_ok());
  // Every fixed row with a flag refuses a different value; every other row accepts one.
  for (const ConfigField& f : config_fields()) {
    if (!f.saved || f.flag.empty()) continue;
    TrainConfig g = *config_from_json(saved);
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(g.*member)>;
          if constexpr (std::is_same_v<T, std::string>) g.*member += "x";
          else if constexpr (std::is_same_v<T, bool>) g.*member = !(g.*member);
          else if constexpr (std::is_arithmetic_v<T>) g.*member = T(g.*member + 1);
        },
        f.member);
    auto merged = adopt_saved_config(g, saved, [&](const std::string& key) { return key == f.key; });
    EXPECT_EQ(merged.is_ok(), !f.fixed_on_resume) << f.key;
  }
}

// A YAML --config file sets exactly what its JSON twin sets; quoted scalars stay text.
TEST(ConfigFile, YamlEqualsItsJsonTwin) {
  const auto none = [](const std::string&) { return false; };
  const std::string yaml =
      "# recipe\nmodel: resnet20\nlr: 0.002\nepochs: 3\nshuffle: false\nseed: 7\nnorm_mean: [0.5]\n"
      "norm_std:\n  - 0.25\nclass_names: [\"true\", '12', plain]\nlabel_column: \"3\"\n";
  const std::string json =
      R"({"model": "resnet20", "lr": 0.002, "epochs": 3, "shuffle": false, "seed": 7, "norm_mean": [0.5],
          "norm_std": [0.25], "class_names": ["true", "12", "plain"], "label_column": "3"})";
  auto y = apply_config_file(TrainConfig{}, yaml, "run.yaml", none);
  ASSERT_TRUE(y.is_ok()) << y.status().message();
  auto j = apply_config_file(TrainConfig{}, json, "run.json", none);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(config_to_json(*y), config_to_json(*j));
  EXPECT_EQ(y->class_names, (std::vector<std::string>{"true", "12", "plain"}));
  EXPECT_EQ(y->label_column, "3");
  auto utf8 = apply_config_file(TrainConfig{}, "class_names: [café, \"日本\", \"\U0001F600\"]\n", "run.yaml", none);
  ASSERT_TRUE(utf8.is_ok()) << utf8.status().message();
  EXPECT_EQ(utf8->class_names, (std::vector<std::string>{"café", "日本", "\U0001F600"}));
}

TEST(ConfigFile, BadYamlNamesFileLineAndColumn) {
  const auto none = [](const std::string&) { return false; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lr: 0.1\nepochs: [1, 2\n", "run.yaml:3:1: YAML: "},
      {"lr: 0.1\nlr: 0.2\n", "run.yaml:2:1: key 'lr' appears twice"},
      {"- 1\n- 2\n", "run.yaml: expected a mapping of settings"},
      {"lr: 0.1\n---\nlr: 0.2\n", "run.yaml:2: a second YAML document"},
      {"lr: fast\n", "run.yaml:1:5: configuration: field 'lr' has the wrong type"},
      // A value out of its range names the line it is on (issue 31), not only the flag.
      {"model: cnn\nlr: -1\nepochs: 2\n", "run.yaml:2:5: lr: must be > 0, got -1"},
      {"epochs: 2\noptimizer: adan\n", "run.yaml:2:12: optimizer: "},
      {"epochs: 2\n\nlerning_rate: 0.1\n", "run.yaml:3:15: 'lerning_rate' is not a setting"},
      {"model: \"a\xe1\x9c" "b\"\n", "run.yaml:1:8: not UTF-8 text"},  // a truncated 3-byte sequence
      {"\xc0\xaf: 1\n", "run.yaml:1:1: not UTF-8 text"},             // an overlong '/'
      {"model: \"\xed\xa0\x80\"\n", "not UTF-8 text"},            // a UTF-16 surrogate
      {"lerning_rate: 0.1\n", "'lerning_rate' is not a setting"},
      {"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
       "more than 100000 values once aliases are expanded"},
      {"a: " + std::string(100, '[') + std::string(100, ']') + "\n", "nested deeper than 64 levels"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text.substr(0, 60));
    auto c = apply_config_file(TrainConfig{}, text, "run.yaml", none);
    ASSERT_FALSE(c.is_ok());
    EXPECT_EQ(c.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace mixprec::train
