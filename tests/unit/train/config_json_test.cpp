// config_json_test.cpp: TrainConfig <-> config.json (issue 13: no unit test). Every field
// survives the round trip with a non-default value; a field of the wrong type, or an
// integer out of its type's range, is invalid_argument naming the field; unknown keys are
// ignored; adopt_saved_config takes the saved value unless the user gave the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train/config_json.h"

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
  c.eval_every = 50;
  c.save_every = 25;
  c.loss_spike_factor = 8;
  c.on_divergence = "rollback";
  c.max_rollbacks = 5;
  c.norm_mean = {0.4914, 0.4822, 0.4465};
  c.norm_std = {0.247, 0.243, 0.261};
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

}  // namespace
}  // namespace mixprec::train
