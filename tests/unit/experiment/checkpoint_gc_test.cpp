// checkpoint_gc_test.cpp: a trial's checkpoints collected by its metric
// (src/experiment/checkpoint_gc.h): the best `keep` by the evaluation at each checkpoint's step,
// the newest too when asked, pointers moved to kept files before anything is deleted, and a
// checkpoint without an evaluation ranked last.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "core/random.h"
#include "experiment/checkpoint_gc.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/core/tensor.h"

namespace mixprec::experiment {
namespace {

namespace fs = std::filesystem;

class CheckpointGc : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("mixprec_gc_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Checkpoints at steps 2, 4, 6, 8; evaluations at 2, 4, 6 (accuracy .5, .9, .7; loss the
    // reverse order of quality) and none at 8.
    for (int64_t step : {2, 4, 6, 8}) {
      TrainingState s;
      s.model.emplace_back("w", Tensor::from_vector({float(step)}, {1}));
      s.rng_state = generator_state();
      s.global_step = s.optimizer_steps = step;
      s.model_name = "custom", s.precision = "fp32";
      ASSERT_TRUE(save_checkpoint(dir_ + "/" + checkpoint_filename(step), s).is_ok());
    }
    std::ofstream m(dir_ + "/metrics.jsonl");
    m << R"({"type":"eval","step":2,"epoch":0,"accuracy":0.5,"loss":1.5})" "\n"
      << R"({"type":"eval","step":4,"epoch":0,"accuracy":0.9,"loss":0.5})" "\n"
      << R"({"type":"eval","step":6,"epoch":0,"accuracy":0.7,"loss":1.0})" "\n";
    std::ofstream(dir_ + "/last.json") << R"({"checkpoint": "step-00000008.safetensors"})";
    std::ofstream(dir_ + "/best.json") << R"({"checkpoint": "step-00000004.safetensors"})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::set<int64_t> on_disk() const {
    std::set<int64_t> steps;
    auto listed = list_checkpoints(dir_);
    if (listed.is_ok())
      for (const auto& [step, file] : *listed) steps.insert(step);
    return steps;
  }
  std::string pointer(const char* which) const {
    std::ifstream f(dir_ + "/" + which + ".json");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto at = text.find("step-");
    return at == std::string::npos ? "" : text.substr(at, 8 + 5);  // "step-00000004"
  }
  std::string dir_;
};

TEST_F(CheckpointGc, KeepsTheBestAndMovesThePointersFirst) {
  auto r = collect_checkpoints(dir_, "accuracy", false, 1, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(on_disk(), (std::set<int64_t>{4}));  // .9 is the best; 8 has no evaluation
  EXPECT_EQ(pointer("last"), "step-00000004");  // last.json named a deleted file: moved
  EXPECT_EQ(pointer("best"), "step-00000004");
  EXPECT_EQ(r->removed.size(), 3u);
  // What the pointer names still loads: eval and predict work on the trial.
  EXPECT_TRUE(resolve_usable_checkpoint(dir_).is_ok());
}

TEST_F(CheckpointGc, KeepsTheNewestWhileTheTrialMayContinue) {
  auto r = collect_checkpoints(dir_, "accuracy", false, 2, true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(on_disk(), (std::set<int64_t>{4, 6, 8}));  // the best two and the newest
  EXPECT_EQ(pointer("last"), "step-00000008");        // untouched: it names a kept file
  EXPECT_EQ(pointer("best"), "step-00000004");
}

TEST_F(CheckpointGc, SmallerIsBetterRanksByLoss) {
  // Loss 0.5 (step 4) is best, then 1.0 (step 6); the checkpoint without one (8) ranks last.
  auto r = collect_checkpoints(dir_, "loss", true, 3, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(on_disk(), (std::set<int64_t>{2, 4, 6}));
  EXPECT_EQ(pointer("last"), "step-00000006");  // the newest kept
}

TEST_F(CheckpointGc, NothingToCollectIsFine) {
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  auto r = collect_checkpoints(dir_, "accuracy", false, 1, true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->kept.empty());
  EXPECT_TRUE(r->removed.empty());
}

}  // namespace
}  // namespace mixprec::experiment
