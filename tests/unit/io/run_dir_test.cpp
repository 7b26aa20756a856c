// run_dir_test.cpp: run directory auto-naming (train, train2, ...), config.json, and
// metrics.jsonl: exact line format, round trip, a partial last line left by kill -9, resume
// truncation; the one-run-per-directory lock (busy naming the holder, released on kill -9)
// and the fresh/resume/overwrite policy.
#include "mixprec/io/run_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace mixprec {
namespace {

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mixprec_rundir_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string dir_;
};

bool is_dir(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}
std::string read_text(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_text(const std::string& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

TEST_F(RunDirTest, AutoNamesIncrementLikeUltralytics) {
  const std::string base = dir_ + "/runs";  // created on demand
  for (const char* expect : {"train", "train2", "train3"}) {
    auto r = create_run_dir(base);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->name, expect);
    EXPECT_EQ(r->path, base + "/" + expect);
    EXPECT_TRUE(is_dir(r->path));
  }
  // A gap is filled first: the first free name wins.
  ASSERT_EQ(std::system(("rm -rf '" + base + "/train2'").c_str()), 0);
  EXPECT_EQ(create_run_dir(base).value().name, "train2");
  EXPECT_EQ(create_run_dir(base).value().name, "train4");
}

TEST_F(RunDirTest, ExplicitNameIsReusedAndValidated) {
  auto a = create_run_dir(dir_, "exp");
  ASSERT_TRUE(a.is_ok());
  auto b = create_run_dir(dir_, "exp");
  ASSERT_TRUE(b.is_ok());  // a resume writes into the same folder
  EXPECT_EQ(b->path, dir_ + "/exp");
  EXPECT_EQ(create_run_dir(dir_, "a/b").status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(create_run_dir(dir_, "..").status().code(), StatusCode::invalid_argument);
  write_text(dir_ + "/file", "x");
  auto clash = create_run_dir(dir_, "file");
  EXPECT_EQ(clash.status().code(), StatusCode::io_error);
  EXPECT_NE(clash.status().message().find("not a directory"), std::string::npos) << clash.status().message();
}

TEST_F(RunDirTest, ConfigJsonIsWrittenAndChecked) {
  auto r = create_run_dir(dir_, "", R"({"lr": 0.001, "model": "cnn"})");
  ASSERT_TRUE(r.is_ok());
  const auto j = nlohmann::json::parse(read_text(r->config_path()));
  EXPECT_EQ(j.at("lr"), 0.001);
  EXPECT_EQ(j.at("model"), "cnn");
  EXPECT_EQ(create_run_dir(dir_, "x", "[1]").status().code(), StatusCode::invalid_argument);
  auto nested = open_run_dir(dir_ + "/a/b/run", R"({"seed": 3})");
  ASSERT_TRUE(nested.is_ok()) << nested.status().message();
  EXPECT_EQ(nested->name, "run");
  EXPECT_EQ(nlohmann::json::parse(read_text(nested->config_path())).at("seed"), 3);
}

TEST_F(RunDirTest, MetricsLinesHaveTheDocumentedFormat) {
  const std::string p = dir_ + "/metrics.jsonl";
  {
    auto log = MetricsLog::open(p);
    ASSERT_TRUE(log.is_ok()) << log.status().message();
    ASSERT_TRUE((*log)->log_step(1, 0, 2.5, 0.001, 65536, false, 0.25).is_ok());
    ASSERT_TRUE((*log)->log_step(2, 0, NAN, 0.001, 32768, true, 0.5).is_ok());
    ASSERT_TRUE((*log)->log_eval(2, 0, 0.875, 0.375).is_ok());
  }
  // Hand-written expectation (binary fractions print exactly; NaN becomes null).
  EXPECT_EQ(read_text(p),
            "{\"type\":\"step\",\"step\":1,\"epoch\":0,\"loss\":2.5,\"lr\":0.001,\"scale\":65536.0,"
            "\"skipped\":false,\"time\":0.25}\n"
            "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"loss\":null,\"lr\":0.001,\"scale\":32768.0,"
            "\"skipped\":true,\"time\":0.5}\n"
            "{\"type\":\"eval\",\"step\":2,\"epoch\":0,\"accuracy\":0.875,\"loss\":0.375}\n");
  auto m = read_metrics(p);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_FALSE(m->truncated_last_line);
  ASSERT_EQ(m->records.size(), 3u);
  EXPECT_EQ(m->records[0].kind, MetricsRecord::Kind::step);
  EXPECT_EQ(m->records[0].loss, 2.5);
  EXPECT_EQ(m->records[0].lr, 0.001);  // shortest round-trip printing keeps the exact double
  EXPECT_EQ(m->records[0].scale, 65536.0);
  EXPECT_EQ(m->records[0].seconds, 0.25);
  EXPECT_TRUE(std::isnan(m->records[1].loss));
  EXPECT_TRUE(m->records[1].skipped);
  EXPECT_EQ(m->records[2].kind, MetricsRecord::Kind::eval);
  EXPECT_EQ(m->records[2].accuracy, 0.875);
  EXPECT_EQ(m->records[2].loss, 0.375);
}

constexpr const char* kTwoLines =
    "{\"type\":\"step\",\"step\":1,\"epoch\":0,\"loss\":2.5,\"lr\":0.1,\"scale\":1,\"skipped\":false,\"time\":1}\n"
    "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"loss\":2.0,\"lr\":0.1,\"scale\":1,\"skipped\":false,\"time\":2}\n";

TEST_F(RunDirTest, TruncatedLastLineIsToleratedAndRepairedOnAppend) {
  const std::string p = dir_ + "/metrics.jsonl";
  write_text(p, std::string(kTwoLines) + "{\"type\":\"step\",\"step\":3,\"ep");  // kill -9 mid-line
  auto m = read_metrics(p);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_TRUE(m->truncated_last_line);
  ASSERT_EQ(m->records.size(), 2u);
  EXPECT_EQ(m->records[1].step, 2);
  {
    auto log = MetricsLog::open(p);  // drops the fragment so the next line starts clean
    ASSERT_TRUE(log.is_ok());
    ASSERT_TRUE((*log)->log_step(3, 0, 1.5, 0.1, 1, false, 3).is_ok());
  }
  m = read_metrics(p);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_FALSE(m->truncated_last_line);
  ASSERT_EQ(m->records.size(), 3u);
  EXPECT_EQ(m->records[2].step, 3);
  EXPECT_EQ(m->records[2].loss, 1.5);
}

TEST_F(RunDirTest, CompleteButUnterminatedLastLineIsKept) {
  const std::string p = dir_ + "/metrics.jsonl";
  std::string text = kTwoLines;
  text.pop_back();  // the newline was lost, the record was not
  write_text(p, text);
  auto m = read_metrics(p);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->records.size(), 2u);
  { ASSERT_TRUE(MetricsLog::open(p).is_ok()); }
  EXPECT_EQ(read_text(p), kTwoLines);  // open() restored the newline before any append
}

TEST_F(RunDirTest, MalformedEarlierLineIsDataLossWithLineNumber) {
  const std::string p = dir_ + "/metrics.jsonl";
  write_text(p, std::string("{\"type\":\"step\",\"step\":1}\n") + kTwoLines);
  auto m = read_metrics(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::data_loss);
  EXPECT_NE(m.status().message().find(p), std::string::npos);
  EXPECT_NE(m.status().message().find("line 1"), std::string::npos) << m.status().message();
  write_text(p, std::string(kTwoLines) + "garbage\n" + kTwoLines);
  m = read_metrics(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("line 3"), std::string::npos) << m.status().message();
  EXPECT_EQ(read_metrics(dir_ + "/none.jsonl").status().code(), StatusCode::not_found);
}

TEST_F(RunDirTest, ResumeDropsRecordsAfterTheCheckpointStep) {
  const std::string p = dir_ + "/metrics.jsonl";
  write_text(p, std::string(kTwoLines) + "{\"type\":\"eval\",\"step\":2,\"epoch\":0,\"accuracy\":0.5,\"loss\":1}\n");
  {
    auto log = MetricsLog::open(p, /*keep_through_step=*/1);
    ASSERT_TRUE(log.is_ok());
    ASSERT_TRUE((*log)->log_step(2, 0, 9.0, 0.1, 1, false, 2).is_ok());
  }
  auto m = read_metrics(p);
  ASSERT_TRUE(m.is_ok());
  ASSERT_EQ(m->records.size(), 2u);
  EXPECT_EQ(m->records[0].loss, 2.5);
  EXPECT_EQ(m->records[1].step, 2);
  EXPECT_EQ(m->records[1].loss, 9.0);  // the re-logged step, not the stale one
}

TEST_F(RunDirTest, UnknownRecordTypesAreSkipped) {
  const std::string p = dir_ + "/metrics.jsonl";
  write_text(p, std::string(kTwoLines) + "{\"type\":\"resume\",\"step\":2,\"epoch\":0,\"loss\":0}\n");
  auto m = read_metrics(p);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->records.size(), 2u);
}

// ---- one run per directory ----

bool exists(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0;
}

TEST_F(RunDirTest, SecondLockIsBusyNamingTheDirAndTheHolder) {
  auto first = RunDirLock::acquire(dir_);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  char host[256] = {0};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(read_text(dir_ + "/run.lock").rfind("pid " + std::to_string(::getpid()) + " host " + host + " since ", 0),
            0u) << read_text(dir_ + "/run.lock");
  // flock belongs to the open file, so a second open in this same process conflicts too.
  auto second = RunDirLock::acquire(dir_);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::busy);
  const std::string& m = second.status().message();
  EXPECT_NE(m.find("run directory '" + dir_ + "' is in use"), std::string::npos) << m;
  EXPECT_NE(m.find("pid " + std::to_string(::getpid()) + " host " + host), std::string::npos) << m;
  first->reset();  // released: the next run gets it
  EXPECT_TRUE(RunDirLock::acquire(dir_).is_ok());
}

TEST_F(RunDirTest, KillMinus9ReleasesTheLock) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = RunDirLock::acquire(dir_);
    const char c = lock.is_ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    ::pause();  // hold it until killed
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  auto busy = RunDirLock::acquire(dir_);
  EXPECT_EQ(busy.status().code(), StatusCode::busy);
  EXPECT_NE(busy.status().message().find("pid " + std::to_string(child)), std::string::npos) << busy.status().message();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  // The kernel dropped the lock with the process; the stale holder line does not matter.
  auto after = RunDirLock::acquire(dir_);
  ASSERT_TRUE(after.is_ok()) << after.status().message();
  EXPECT_NE(read_text(dir_ + "/run.lock").find("pid " + std::to_string(::getpid())), std::string::npos);
}

TEST_F(RunDirTest, FreshRunRefusesADirHoldingARun) {
  const std::string d = dir_ + "/run";
  {
    auto empty = claim_run_dir(d, RunDirMode::fresh);  // created on demand, holds nothing yet
    ASSERT_TRUE(empty.is_ok()) << empty.status().message();
    EXPECT_TRUE(is_dir(d));
  }
  // Each file a run leaves behind is enough on its own, a partial run included.
  for (const char* name : {"config.json", "metrics.jsonl", "last.json", "best.json", "step-00000007.safetensors",
                           "nonfinite-step-00000003.safetensors"}) {
    SCOPED_TRACE(name);
    write_text(d + "/" + name, "x");
    auto r = claim_run_dir(d, RunDirMode::fresh);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(r.status().message().find("'" + d + "' already holds a run"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--resume"), std::string::npos);
    EXPECT_NE(r.status().message().find("--overwrite"), std::string::npos);
    ASSERT_EQ(::unlink((d + "/" + name).c_str()), 0);
  }
  // Files that are not a run's do not count (and the lock file is ours).
  write_text(d + "/notes.txt", "mine");
  write_text(d + "/step-old.safetensors", "not a checkpoint name");
  EXPECT_TRUE(claim_run_dir(d, RunDirMode::fresh).is_ok());
}

TEST_F(RunDirTest, OverwriteDeletesOnlyTheEarlierRunsFilesAndResumeKeepsThem) {
  const std::string d = dir_ + "/run";
  ASSERT_TRUE(claim_run_dir(d, RunDirMode::fresh).is_ok());
  const char* run[] = {"config.json", "metrics.jsonl", "last.json", "best.json", "step-00000002.safetensors",
                       "step-00000004.safetensors", "nonfinite-step-00000003.safetensors",
                       "step-00000006.safetensors.tmp.999", "training.png", "training.svg", "training.gp",
                       "plot_steps.dat", "plot_evals.dat"};
  const char* keep[] = {"notes.txt", "model.onnx", "other.tmp.1"};
  for (const char* f : run) write_text(d + "/" + f, "x");
  for (const char* f : keep) write_text(d + "/" + f, "x");
  {
    auto r = claim_run_dir(d, RunDirMode::resume);
    ASSERT_TRUE(r.is_ok());
    for (const char* f : run) EXPECT_TRUE(exists(d + "/" + f)) << f;
  }
  {
    // Not while another process runs there: the lock comes first.
    auto held = RunDirLock::acquire(d);
    ASSERT_TRUE(held.is_ok());
    EXPECT_EQ(claim_run_dir(d, RunDirMode::overwrite).status().code(), StatusCode::busy);
    EXPECT_TRUE(exists(d + "/config.json"));
  }
  auto r = claim_run_dir(d, RunDirMode::overwrite);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  for (const char* f : run) EXPECT_FALSE(exists(d + "/" + f)) << f;
  for (const char* f : keep) EXPECT_TRUE(exists(d + "/" + f)) << f;
  EXPECT_TRUE(run_files(d).value().empty());
}

}  // namespace
}  // namespace mixprec
