// run_checks_test.cpp: what train::run refuses before its first step, so that no work is
// lost to a failure that was certain from the start:
//  - a model file whose path is not UTF-8 (its path is the model's name in config.json and in
//    every checkpoint header, which is JSON): trained until the first checkpoint, which could
//    not be encoded ("header not encodable"); now refused before any step, naming --model;
//  - an empty model file: trained the built-in cnn under the file's name; now refused;
//  - check_checkpoint_encodable names the metadata key or tensor that is not UTF-8.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "unit/data/data_test_util.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/train/train.h"
#include "mixprec/train/train_config.h"

namespace mixprec {
namespace {

using testing_data::TempDir;

const char* kSmallModel = "layers:\n  - flatten\n  - linear: {out: 16}\n  - relu\n  - linear: {out: classes}\n";

train::TrainConfig small_run(const std::string& model, const std::string& run_dir) {
  train::TrainConfig c;
  c.model = model;
  c.dataset = "synthetic";
  c.precision = "fp32";
  c.batch_size = 8;
  c.max_steps = 2;
  c.epochs = 1;
  c.train_subset = 32;
  c.test_subset = 8;
  c.self_check = false;
  c.run_dir = run_dir;
  c.threads = 1;
  return c;
}

// Counts the steps a run announced and trained: a refusal must come before both.
struct Seen {
  int starts = 0, steps = 0;
  train::Callbacks callbacks() {
    train::Callbacks cb;
    cb.on_start = [this](const train::TrainConfig&, const auto&) { ++starts; };
    cb.on_step = [this](const train::StepReport&) { ++steps; };
    return cb;
  }
};

TEST(RunChecks, AModelFilePathThatIsNotUtf8IsRefusedBeforeTheFirstStep) {
  TempDir dir;
  const std::string model = dir.file("net\xff.yaml");
  std::ofstream(model) << kSmallModel;
  Seen seen;
  auto r = train::run(small_run(model, dir.file("run")), seen.callbacks());
  ASSERT_FALSE(r.is_ok()) << "trained " << r->steps << " steps";
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(r.status().message().find("--model: "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("net\xef\xbf\xbd.yaml\" is not UTF-8 text"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(seen.starts, 0);
  EXPECT_EQ(seen.steps, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/config.json")));
  // Nothing is recorded without a run directory: then it trains.
  Seen unrecorded;
  auto none = train::run(small_run(model, ""), unrecorded.callbacks());
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  EXPECT_EQ(unrecorded.steps, 2);
  // The same file under a UTF-8 name trains and checkpoints.
  const std::string good = dir.file("net-é.yaml");
  std::ofstream(good) << kSmallModel;
  auto ok = train::run(small_run(good, dir.file("run2")));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_TRUE(std::filesystem::exists(dir.file("run2/last.json")));
}

TEST(RunChecks, AnotherSettingThatIsNotUtf8IsNamedByItsFlag) {
  TempDir dir;
  const std::string model = dir.file("net.yaml");
  std::ofstream(model) << kSmallModel;
  train::TrainConfig c = small_run(model, dir.file("run"));
  c.label_column = "lab\xc3";  // a truncated UTF-8 sequence
  EXPECT_EQ(train::check_recordable(small_run(model, "r")).message(), "");
  const Status s = train::check_recordable(c);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_EQ(s.message().rfind("--label-column: \"lab\xef\xbf\xbd\" is not UTF-8 text", 0), 0u) << s.message();
}

TEST(RunChecks, AnEmptyModelFileIsRefusedNotTrainedAsTheBuiltInCnn) {
  TempDir dir;
  for (const std::string text : {"", "\n  \n\t\n"}) {
    const std::string model = dir.file("empty.yaml");
    std::ofstream(model) << text;
    auto read = nn::read_model_file(model);
    ASSERT_FALSE(read.is_ok()) << "read as " << read->size() << " bytes";
    EXPECT_EQ(read.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(read.status().message().find("model file '" + model + "' is empty"), std::string::npos)
        << read.status().message();
    EXPECT_NE(read.status().message().find("expected a YAML or JSON model with a 'layers' list"), std::string::npos)
        << read.status().message();
    Seen seen;
    auto r = train::run(small_run(model, ""), seen.callbacks());
    ASSERT_FALSE(r.is_ok()) << "trained " << r->steps << " steps of " << model;
    EXPECT_NE(r.status().message().find("is empty"), std::string::npos) << r.status().message();
    EXPECT_EQ(seen.steps, 0);
  }
}

TEST(RunChecks, CheckpointEncodableNamesTheKeyOrTensor) {
  TrainingState st;
  st.model_name = "cnn";
  st.precision = "fp32";
  st.model.emplace_back("fc.weight", Tensor::zeros({2}));
  EXPECT_TRUE(check_checkpoint_encodable(st).is_ok());
  TempDir dir;
  EXPECT_TRUE(save_checkpoint(dir.file("ok.safetensors"), st).is_ok());
  st.model_name = "a\xff.yaml";
  Status s = check_checkpoint_encodable(st);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("metadata key 'model_name': \"a\xef\xbf\xbd.yaml\" is not UTF-8"), std::string::npos)
      << s.message();
  // What check_checkpoint_encodable refuses is what save_checkpoint cannot write.
  EXPECT_FALSE(save_checkpoint(dir.file("x.safetensors"), st).is_ok());
  st.model_name = "cnn";
  st.model.emplace_back("fc\x80.bias", Tensor::zeros({2}));
  s = check_checkpoint_encodable(st);
  EXPECT_NE(s.message().find("tensor name \"fc\xef\xbf\xbd.bias\""), std::string::npos) << s.message();
}

}  // namespace
}  // namespace mixprec
