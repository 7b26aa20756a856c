// save_checked_test.cpp: the trainer's save path. Only a finite, resumable state becomes a
// step-N checkpoint that last.json/best.json name; a state holding inf/NaN goes only to the
// nonfinite-step-N diagnostic (never a pointer's target), a state resume would refuse is not
// written at all; and run_dir_of finds the directory a run writes to.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/convert.h"
#include "core/random.h"
#include "train/checkpointing.h"

namespace mixprec::train {
namespace {

class SaveCheckedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mixprec_save_checked_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string pointer(const char* which) const {
    std::ifstream in(dir_ + "/" + which + ".json");
    if (!in) return "";
    return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {})).at("checkpoint");
  }
  bool exists(const std::string& name) const {
    struct stat sb;
    return ::stat((dir_ + "/" + name).c_str(), &sb) == 0;
  }
  std::string dir_;
};

TrainingState state_at(int64_t step) {
  TrainingState s;
  s.model.emplace_back("fc.weight", Tensor::full({3, 5}, 0.25));
  s.model.emplace_back("fc.bias", Tensor::full({3}, -0.5, DType::bf16));
  s.masters["fc.bias"] = Tensor::full({3}, -0.5);
  s.optimizer["exp_avg.0"] = Tensor::zeros({3, 5});
  s.scaler = {{"scale", 1024.0}, {"growth_factor", 2.0}, {"backoff_factor", 0.5},
              {"growth_interval", 100.0}, {"_growth_tracker", 3.0}};
  s.rng_state = generator_state();
  s.global_step = s.optimizer_steps = step;
  s.precision = "o2-bf16";
  s.model_name = "test";
  return s;
}

TEST_F(SaveCheckedTest, FiniteStateBecomesTheCheckpointThePointersName) {
  auto r = save_checked(dir_, state_at(4), /*is_best=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->usable);
  EXPECT_EQ(r->file, dir_ + "/step-00000004.safetensors");
  EXPECT_EQ(pointer("last"), "step-00000004.safetensors");
  EXPECT_EQ(pointer("best"), "step-00000004.safetensors");
}

TEST_F(SaveCheckedTest, NonFiniteStateIsOnlyADiagnosticAndNoPointerMoves) {
  ASSERT_TRUE(save_checked(dir_, state_at(4), true).is_ok());
  for (const char* where : {"model", "master", "optimizer"}) {
    SCOPED_TRACE(where);
    TrainingState s = state_at(8);
    Tensor t = std::string(where) == "model"    ? s.model[1].second
               : std::string(where) == "master" ? s.masters["fc.bias"]
                                                : s.optimizer["exp_avg.0"];
    store_from_double(t.data(), t.dtype(), t.numel() - 1, std::nan(""));
    auto r = save_checked(dir_, s, /*is_best=*/true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_FALSE(r->usable);
    EXPECT_EQ(r->file, dir_ + "/nonfinite-step-00000008.safetensors");
    const std::string first = std::string(where) == "model"    ? "fc.bias"
                              : std::string(where) == "master" ? "master.fc.bias"
                                                               : "optimizer.exp_avg.0";
    EXPECT_NE(r->problem.find("tensor '" + first + "' holds 1 inf/NaN value"), std::string::npos) << r->problem;
    EXPECT_NE(r->problem.find("nonfinite-step-00000008.safetensors"), std::string::npos);
    EXPECT_FALSE(exists("step-00000008.safetensors"));
    EXPECT_TRUE(exists("nonfinite-step-00000008.safetensors"));
    EXPECT_EQ(pointer("last"), "step-00000004.safetensors");
    EXPECT_EQ(pointer("best"), "step-00000004.safetensors");
    // The diagnostic loads (for mixprec inspect) and still holds the NaN.
    auto back = load_checkpoint(r->file);
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(find_nonfinite(*back)->first_tensor, first);
    ASSERT_EQ(::unlink(r->file.c_str()), 0);
  }
}

TEST_F(SaveCheckedTest, UnresumableStateIsNotWritten) {
  ASSERT_TRUE(save_checked(dir_, state_at(4), false).is_ok());
  TrainingState s = state_at(8);
  s.scaler["scale"] = 0.0;  // a scale that underflowed: a resume would refuse it
  auto r = save_checked(dir_, s, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->usable);
  EXPECT_TRUE(r->file.empty());
  EXPECT_NE(r->problem.find("entry 'scale'"), std::string::npos) << r->problem;
  EXPECT_FALSE(exists("step-00000008.safetensors"));
  EXPECT_EQ(pointer("last"), "step-00000004.safetensors");
}

TEST_F(SaveCheckedTest, RunDirOfTheFlags) {
  TrainConfig c;
  EXPECT_EQ(run_dir_of(c), "");
  c.run_dir = "runs/a";
  c.resume = dir_;
  EXPECT_EQ(run_dir_of(c), "runs/a");  // --run-dir wins
  c.run_dir.clear();
  EXPECT_EQ(run_dir_of(c), dir_);
  ASSERT_TRUE(save_checked(dir_, state_at(4), false).is_ok());
  c.resume = dir_ + "/step-00000004.safetensors";
  EXPECT_EQ(run_dir_of(c), dir_);
  c.resume = dir_ + "/missing";
  EXPECT_EQ(run_dir_of(c), "");  // the resume fails on its own; nothing is created
}

}  // namespace
}  // namespace mixprec::train
