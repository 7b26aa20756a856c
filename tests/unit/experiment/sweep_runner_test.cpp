// sweep_runner_test.cpp: run_sweep (mixprec/experiment/sweep.h) driving a stand-in for `mixprec train`:
// a shell script that logs what `train` would (a step and an evaluation at --max-steps) or
// never ends. Checks what needs no real training: the cores divided among concurrent trials,
// the metric read from metrics.jsonl, the time budget stopping a trial that would run forever
// (the outcome does not depend on how long anything takes: the trial never ends by itself),
// and the refusal of a bad preset before any trial starts; ranks_per_trial's mpirun command,
// core division, refusals and stop signal. Real training, kill -9 and resume (and a sweep of
// data-parallel trials under the real mpirun): tests/e2e/sweep_test.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mixprec/experiment/experiment.h"
#include "mixprec/experiment/sweep.h"

namespace mixprec::experiment {
namespace {

namespace fs = std::filesystem;

class SweepRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("mixprec_sweep_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The stand-in for `mixprec train`: `body` runs with $dir (the run directory) and $steps
  // (--max-steps) set from its arguments.
  std::string script(const std::string& body) {
    const std::string path = dir_ + "/fake-train";
    std::ofstream(path) << "#!/bin/sh\ndir=; steps=\nwhile [ $# -gt 0 ]; do case \"$1\" in\n"
                           "  --run-dir|--resume) dir=$2; shift;;\n  --max-steps) steps=$2; shift;;\nesac; shift; done\n"
                        << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  StatusOr<ExperimentSpec> spec(const std::string& rest) {
    return parse_experiment("name: t\nbase: {dataset: synthetic, precision: fp32}\n" + rest, "t.yaml");
  }
  static std::string read(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

TEST_F(SweepRunner, CoresAreDividedAmongConcurrentTrialsAndMetricsRead) {
  // Each run logs its last step and an evaluation there whose accuracy is steps / 10.
  const std::string exe = script(
      "echo \"{\\\"type\\\":\\\"step\\\",\\\"step\\\":$steps,\\\"epoch\\\":0,\\\"loss\\\":1.0,\\\"lr\\\":0.1,"
      "\\\"scale\\\":1.0,\\\"skipped\\\":false,\\\"time\\\":0.1}\" >> $dir/metrics.jsonl\n"
      "echo \"{\\\"type\\\":\\\"eval\\\",\\\"step\\\":$steps,\\\"epoch\\\":0,\\\"accuracy\\\":0.$steps,\\\"loss\\\":1.0}\""
      " >> $dir/metrics.jsonl");
  auto s = spec("hyperparameters:\n  lr: {type: log, min: 0.001, max: 0.1}\n"
                "searcher: {name: random, max_trials: 3}\nmax_steps: 5\nmax_concurrent_trials: 2\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  SweepOptions opt;
  opt.experiment_dir = dir_ + "/exp";
  opt.executable = exe;
  opt.cores = 4;
  auto r = run_sweep(*s, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->concurrent, 2);
  EXPECT_EQ(r->threads_per_trial, 2);  // 4 cores, 2 at once: never more threads than cores
  ASSERT_EQ(r->state.trials.size(), 3u);
  for (const TrialRecord& t : r->state.trials) {
    EXPECT_EQ(t.state, "completed") << t.dir;
    EXPECT_EQ(t.steps, 5);
    ASSERT_EQ(t.metrics.size(), 1u);
    EXPECT_DOUBLE_EQ(t.metrics[0], 0.5);
    const std::string log = read(opt.experiment_dir + "/" + t.dir + "/train.log");
    EXPECT_NE(log.find("train --config " + opt.experiment_dir + "/" + t.dir + "/trial.json --run-dir"), std::string::npos) << log;
    EXPECT_NE(log.find("--max-steps 5 --threads 2"), std::string::npos) << log;
  }
  EXPECT_EQ(r->state.status, "finished");
  // The state file says the same as the result.
  auto saved = state_from_json(read(opt.experiment_dir + "/experiment.json"), "experiment.json");
  ASSERT_TRUE(saved.is_ok()) << saved.status().message();
  EXPECT_EQ(state_to_json(*saved), state_to_json(r->state));
  // More trials at once than cores: as many as the cores, one thread each.
  opt.experiment_dir = dir_ + "/exp2";
  opt.cores = 1;
  auto one = run_sweep(*s, opt);
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  EXPECT_EQ(one->concurrent, 1);
  EXPECT_EQ(one->threads_per_trial, 1);
}

TEST_F(SweepRunner, TimeBudgetStopsATrialThatWouldRunForever) {
  // Never ends by itself; on SIGINT (what the sweep sends when the budget is used up) it stops
  // as `mixprec train` does after Ctrl-C, with exit code 130.
  const std::string exe = script("trap 'exit 130' INT\nwhile :; do sleep 0.05; done");
  auto s = spec("searcher: {name: random, max_trials: 1}\nmax_steps: 5\nmax_seconds: 0.2\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  SweepOptions opt;
  opt.experiment_dir = dir_ + "/exp";
  opt.executable = exe;
  opt.cores = 1;
  auto r = run_sweep(*s, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->state.trials.size(), 1u);
  const TrialRecord& t = r->state.trials[0];
  EXPECT_EQ(t.state, "stopped");
  EXPECT_NE(t.error.find("time budget of 0.2 s used up"), std::string::npos) << t.error;
  EXPECT_EQ(t.restarts, 0);  // not a failure
  EXPECT_GE(t.seconds, 0.2);
  EXPECT_EQ(r->best, -1);  // it logged no evaluation
}

TEST_F(SweepRunner, BadValuesAreRefusedBeforeAnyTrialStarts) {
  auto s = spec("hyperparameters:\n  precision: {type: categorical, values: [fp32, amp-bf17]}\n"
                "searcher: {name: random, max_trials: 2}\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();  // the parser knows no presets; validate() does
  SweepOptions opt;
  opt.experiment_dir = dir_ + "/exp";
  opt.executable = script("exit 0");
  auto r = run_sweep(*s, opt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(r.status().message().find("t.yaml:4:14: hyperparameters.precision = \"amp-bf17\": --precision"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(opt.experiment_dir));
}

// ranks_per_trial: each trial under mpirun (here a stand-in named by MIXPREC_MPIRUN that
// drops its options and runs the rest, as mpirun would on each rank).
class SweepRunnerMpi : public SweepRunner {
 protected:
  std::string fake_mpirun() {
    const std::string path = dir_ + "/fake-mpirun";
    std::ofstream(path) << "#!/bin/sh\nwhile [ $# -gt 0 ]; do case \"$1\" in\n"
                           "  -np|--bind-to) shift;;\n  --*) ;;\n  *) break;;\nesac; shift; done\nexec \"$@\"\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  void TearDown() override {
    ::unsetenv("MIXPREC_MPIRUN");
    SweepRunner::TearDown();
  }
};

TEST_F(SweepRunnerMpi, TrialsRunUnderMpirunAndTheCoresCountEveryRank) {
  const std::string mpirun = fake_mpirun();
  ::setenv("MIXPREC_MPIRUN", mpirun.c_str(), 1);
  const std::string exe = script(
      "echo \"{\\\"type\\\":\\\"eval\\\",\\\"step\\\":$steps,\\\"epoch\\\":0,\\\"accuracy\\\":0.5,\\\"loss\\\":1.0}\""
      " >> $dir/metrics.jsonl");
  auto s = spec("searcher: {name: random, max_trials: 2}\nmax_steps: 3\nmax_concurrent_trials: 4\nranks_per_trial: 2\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  SweepOptions opt;
  opt.experiment_dir = dir_ + "/exp";
  opt.executable = exe;
  opt.cores = 5;  // 2 trials of 2 ranks fit, one thread each (the fifth core stays idle)
  auto r = run_sweep(*s, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->ranks_per_trial, 2);
  EXPECT_EQ(r->concurrent, 2);
  EXPECT_EQ(r->threads_per_trial, 1);
  for (const TrialRecord& t : r->state.trials) {
    EXPECT_EQ(t.state, "completed") << t.dir;
    const std::string log = read(opt.experiment_dir + "/" + t.dir + "/train.log");
    EXPECT_NE(log.find("sweep: " + mpirun + " -np 2 --oversubscribe --bind-to none " + (::geteuid() == 0 ? "--allow-run-as-root " : "") +
                       exe + " train --config"), std::string::npos) << log;
  }
  // The reproduce command runs the same job size.
  const auto cmd = reproduce_command("mixprec", "exp", r->state.trials[0], 2);
  EXPECT_EQ(std::vector<std::string>(cmd.begin(), cmd.begin() + 5),
            (std::vector<std::string>{"mpirun", "-np", "2", "mixprec", "train"}));
  // 8 cores, 2 trials of 2 ranks at most: 2 threads per rank.
  opt.experiment_dir = dir_ + "/exp8";
  opt.cores = 8;
  auto s2 = spec("searcher: {name: random, max_trials: 2}\nmax_steps: 3\nmax_concurrent_trials: 2\nranks_per_trial: 2\n");
  ASSERT_TRUE(s2.is_ok()) << s2.status().message();
  auto r8 = run_sweep(*s2, opt);
  ASSERT_TRUE(r8.is_ok()) << r8.status().message();
  EXPECT_EQ(r8->concurrent, 2);
  EXPECT_EQ(r8->threads_per_trial, 2);
}

TEST_F(SweepRunnerMpi, MoreRanksThanCoresOrNoMpirunIsRefusedBeforeAnyTrialStarts) {
  ::setenv("MIXPREC_MPIRUN", fake_mpirun().c_str(), 1);
  auto s = spec("searcher: {name: random, max_trials: 2}\nmax_steps: 3\nranks_per_trial: 3\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  SweepOptions opt;
  opt.experiment_dir = dir_ + "/exp";
  opt.executable = script("exit 1");
  opt.cores = 2;
  auto r = run_sweep(*s, opt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(r.status().message().find("ranks_per_trial 3 is more than the 2 core(s) this sweep may use"),
            std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(opt.experiment_dir + "/trial-0001"));
  // mpirun named but not there.
  ::setenv("MIXPREC_MPIRUN", (dir_ + "/no-such-mpirun").c_str(), 1);
  opt.cores = 4;
  opt.experiment_dir = dir_ + "/exp2";
  auto m = run_sweep(*s, opt);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("is not an executable file"), std::string::npos) << m.status().message();
}

TEST_F(SweepRunnerMpi, TimeBudgetStopsADataParallelTrialWithSigusr1) {
  // mpirun ends its ranks at once on SIGINT, and forwards SIGUSR1, on which every rank stops
  // after the same step with a checkpoint: the stand-in fails on SIGINT, stops on SIGUSR1.
  ::setenv("MIXPREC_MPIRUN", fake_mpirun().c_str(), 1);
  const std::string exe = script("trap 'exit 130' USR1\ntrap 'exit 3' INT\nwhile :; do sleep 0.05; done");
  auto s = spec("searcher: {name: random, max_trials: 1}\nmax_steps: 5\nmax_seconds: 0.2\nranks_per_trial: 2\n");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  SweepOptions opt;
  opt.experiment_dir = dir_ + "/exp";
  opt.executable = exe;
  opt.cores = 2;
  auto r = run_sweep(*s, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->state.trials.size(), 1u);
  EXPECT_EQ(r->state.trials[0].state, "stopped") << r->state.trials[0].error;
  EXPECT_EQ(r->state.trials[0].restarts, 0);
}

}  // namespace
}  // namespace mixprec::experiment
