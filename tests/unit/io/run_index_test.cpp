// run_index_test.cpp: what `mixprec dashboard` may show and open (run_index.h). Run discovery
// (plain run folders, an experiment's trials grouped under it, hidden and symlinked folders),
// the id mapping (ids round-trip any folder name; "..", absolute paths, bad escapes and
// symlinks leading out of the given folders refused), the running state against a lock
// actually held (RunDirLock; read from /proc/locks, and by the fallback without it), and the
// incremental metrics reader: only complete new lines,
// a partial last line held back until complete, offsets past the end, inside a line or of a
// replaced file restart at 0, and bytes before the offset are never read again.
#include "mixprec/io/run_index.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "mixprec/io/run_dir.h"

namespace mixprec::runs {
namespace {

class RunIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mixprec_run_index_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  void write(const std::string& relative, const std::string& text) {
    std::ofstream(dir_ + "/" + relative, std::ios::binary) << text;
  }
  void mkdirs(const std::string& relative) {
    std::string path = dir_;
    size_t start = 0;
    while (start <= relative.size()) {
      size_t slash = relative.find('/', start);
      if (slash == std::string::npos) slash = relative.size();
      path += "/" + relative.substr(start, slash - start);
      ::mkdir(path.c_str(), 0755);
      start = slash + 1;
    }
  }
  void make_run(const std::string& relative) {
    mkdirs(relative);
    write(relative + "/config.json", "{\"precision\": \"amp-bf16\"}\n");
    write(relative + "/metrics.jsonl", "");
  }
  RunRoots roots(const std::vector<std::string>& dirs) {
    auto r = RunRoots::open(dirs);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return *r;
  }
  std::string dir_;
};

TEST_F(RunIndexTest, FindsRunsAndGroupsAnExperimentsTrials) {
  make_run("runs/train");
  make_run("runs/train2");
  make_run("runs/sweep/trial-0001");
  make_run("runs/sweep/trial-0002");
  write("runs/sweep/experiment.json", "{\"best_trial\": 2}\n");
  make_run("runs/.hidden/train");           // hidden folders are not searched
  mkdirs("runs/notarun");                   // config.json alone is not a run
  write("runs/notarun/config.json", "{}");
  mkdirs("runs/train/sub");                 // a run's own subfolders are not searched
  make_run("runs/train/sub/inner");

  const RunIndex index = roots({dir_ + "/runs"}).scan();
  ASSERT_EQ(index.runs.size(), 4u);
  EXPECT_EQ(index.runs[0].id, "0:sweep/trial-0001");
  EXPECT_EQ(index.runs[0].name, "trial-0001");
  EXPECT_EQ(index.runs[0].experiment, "0:sweep");
  EXPECT_EQ(index.runs[1].experiment, "0:sweep");
  EXPECT_EQ(index.runs[2].id, "0:train");
  EXPECT_EQ(index.runs[2].relative, "train");
  EXPECT_EQ(index.runs[2].experiment, "");  // runs/ itself is a plain folder of runs
  EXPECT_EQ(index.runs[3].id, "0:train2");
  ASSERT_EQ(index.experiments.size(), 1u);
  EXPECT_EQ(index.experiments[0].id, "0:sweep");
  EXPECT_EQ(index.experiments[0].json_files, std::vector<std::string>{"experiment.json"});
  EXPECT_FALSE(index.truncated);
}

TEST_F(RunIndexTest, AGivenRunOrExperimentIsItsOwnEntry) {
  make_run("exp/trial-0001");
  write("exp/state.json", "{}");
  make_run("single");
  const RunIndex index = roots({dir_ + "/exp", dir_ + "/single/"}).scan();
  ASSERT_EQ(index.runs.size(), 2u);
  EXPECT_EQ(index.runs[0].id, "0:trial-0001");
  EXPECT_EQ(index.runs[0].experiment, "0:.");  // the given folder holds a state file
  EXPECT_EQ(index.runs[1].id, "1:.");
  EXPECT_EQ(index.runs[1].name, "single");
  ASSERT_EQ(index.experiments.size(), 1u);
  EXPECT_EQ(index.experiments[0].name, "exp");
}

TEST_F(RunIndexTest, IdsRoundTripAnyFolderName) {
  // A name holds any byte but '/' and NUL; "<script>alert(1)</script>" is two folders.
  const std::string hostile = "<img src=x onerror=alert(1)> 'x' \"y\" %2e%2e \xff";
  make_run("runs/" + hostile);
  make_run("runs/<script>alert(1)</script>");
  const RunRoots r = roots({dir_ + "/runs"});
  const RunIndex index = r.scan();
  ASSERT_EQ(index.runs.size(), 2u);
  EXPECT_EQ(index.runs[1].relative, "<script>alert(1)</script>");
  EXPECT_EQ(index.runs[1].name, "script>");
  EXPECT_EQ(index.runs[1].experiment, "0:%3Cscript%3Ealert%281%29%3C");  // the folder holding it
  EXPECT_TRUE(r.resolve_run(index.runs[1].id).is_ok());
  EXPECT_EQ(index.runs[0].name, hostile);
  for (char c : index.runs[0].id) EXPECT_TRUE(c > 0x20 && c < 0x7f) << index.runs[0].id;  // ASCII, no spaces
  auto resolved = r.resolve_run(index.runs[0].id);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  char real[PATH_MAX];
  ASSERT_NE(::realpath((dir_ + "/runs/" + hostile).c_str(), real), nullptr);
  EXPECT_EQ(*resolved, std::string(real));
  EXPECT_EQ(r.display_path(index.runs[0].id), dir_ + "/runs/" + hostile);
}

TEST_F(RunIndexTest, RefusesIdsThatLeaveTheGivenFolders) {
  make_run("runs/train");
  make_run("outside");  // a run, but not under the given folder
  ASSERT_EQ(::symlink((dir_ + "/outside").c_str(), (dir_ + "/runs/escape").c_str()), 0);
  ASSERT_EQ(::symlink("../outside/config.json", (dir_ + "/runs/train/leak.json").c_str()), 0);
  const RunRoots r = roots({dir_ + "/runs"});
  EXPECT_TRUE(r.resolve_run("0:train").is_ok());
  for (const std::string& id : std::vector<std::string>{"0:../outside", "0:train/../../outside", "0:%2E%2E/outside", "0:train%2F..%2F..",
                               "0:/etc", "0:", "train", "1:train", "x:train", "0:train//", "0:train/.", "0:%zz",
                               std::string("0:train\0x", 9)}) {
    auto got = r.resolve_dir(id);
    ASSERT_FALSE(got.is_ok()) << id << " resolved to " << *got;
    EXPECT_EQ(got.status().code(), StatusCode::invalid_argument) << id << ": " << got.status().message();
  }
  // Well-formed ids whose folder or file a symlink takes elsewhere: not found, as if absent.
  auto escaped = r.resolve_run("0:escape");
  ASSERT_FALSE(escaped.is_ok());
  EXPECT_EQ(escaped.status().code(), StatusCode::not_found);
  auto leaked = r.resolve_file("0:train", "leak.json");
  ASSERT_FALSE(leaked.is_ok());
  EXPECT_EQ(leaked.status().code(), StatusCode::not_found);
  EXPECT_FALSE(r.resolve_file("0:train", "../train/config.json").is_ok());
  EXPECT_TRUE(r.resolve_file("0:train", "config.json").is_ok());
  // Discovery does not follow the symlink out either.
  const RunIndex index = r.scan();
  ASSERT_EQ(index.runs.size(), 1u);
  EXPECT_EQ(index.runs[0].id, "0:train");
}

TEST_F(RunIndexTest, SymlinksInsideTheFolderAreFollowedOnce) {
  make_run("runs/a/train");
  ASSERT_EQ(::symlink((dir_ + "/runs/a").c_str(), (dir_ + "/runs/b").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/runs").c_str(), (dir_ + "/runs/a/loop").c_str()), 0);
  const RunRoots r = roots({dir_ + "/runs"});
  EXPECT_EQ(r.scan().runs.size(), 1u);  // a/train once: b is the same folder, loop leads back
  EXPECT_TRUE(r.resolve_run("0:b/train").is_ok());
}

TEST_F(RunIndexTest, OpenNamesAMissingFolder) {
  auto r = RunRoots::open({dir_ + "/nope"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::not_found);
  EXPECT_NE(r.status().message().find(dir_ + "/nope"), std::string::npos) << r.status().message();
}

TEST_F(RunIndexTest, ARunIsRunningWhileItsLockIsHeld) {
  make_run("held");
  make_run("free");
  make_run("nolock");
  auto lock = RunDirLock::acquire(dir_ + "/held");
  ASSERT_TRUE(lock.is_ok()) << lock.status().message();
  {
    auto other = RunDirLock::acquire(dir_ + "/free");  // taken and released: a finished run
    ASSERT_TRUE(other.is_ok());
  }
  const std::vector<std::string> dirs = {dir_ + "/held", dir_ + "/free", dir_ + "/nolock"};
  EXPECT_EQ(run_locks_held(dirs), (std::vector<bool>{true, false, false}));
  // Asking never takes the lock: a run can still claim the free directory afterwards.
  EXPECT_TRUE(RunDirLock::acquire(dir_ + "/free").is_ok());
  // Without /proc/locks: by a shared lock tried and dropped at once.
  EXPECT_EQ(run_locks_held(dirs, dir_ + "/no-proc-locks"), (std::vector<bool>{true, false, false}));
  EXPECT_TRUE(RunDirLock::acquire(dir_ + "/free").is_ok());
  lock->reset();
  EXPECT_EQ(run_locks_held({dir_ + "/held"}), std::vector<bool>{false});
  EXPECT_EQ(run_locks_held({dir_ + "/held"}, dir_ + "/no-proc-locks"), std::vector<bool>{false});
}

// The reader against an independent reference: the lines of the bytes written, split by hand.
TEST_F(RunIndexTest, NewLinesReturnsOnlyCompleteNewLines) {
  const std::string path = dir_ + "/metrics.jsonl";
  write("metrics.jsonl", "{\"step\":1}\n{\"step\":2}\n{\"ste");
  auto first = read_new_lines(path, 0, "", 1 << 20);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_EQ(first->lines, (std::vector<std::string>{"{\"step\":1}", "{\"step\":2}"}));
  EXPECT_EQ(first->offset, 22u);  // the partial third line starts there
  EXPECT_EQ(first->size, 27u);
  EXPECT_FALSE(first->reset);
  EXPECT_FALSE(first->more);

  auto again = read_new_lines(path, first->offset, first->file_id, 1 << 20);  // still partial
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->lines.empty());
  EXPECT_EQ(again->offset, 22u);

  std::ofstream(path, std::ios::app) << "p\":3}\n{\"step\":4}\n";
  auto grown = read_new_lines(path, again->offset, again->file_id, 1 << 20);
  ASSERT_TRUE(grown.is_ok());
  EXPECT_EQ(grown->lines, (std::vector<std::string>{"{\"step\":3}", "{\"step\":4}"}));
  EXPECT_EQ(grown->offset, 44u);
  EXPECT_EQ(grown->file_id, first->file_id);
}

TEST_F(RunIndexTest, NewLinesNeverRereadsBytesBeforeTheOffset) {
  const std::string path = dir_ + "/metrics.jsonl";
  write("metrics.jsonl", "aaaa\nbbbb\n");
  auto first = read_new_lines(path, 0, "", 1 << 20);
  ASSERT_TRUE(first.is_ok());
  // Overwrite the first line in place (same file, same length) and append: a reader that
  // read the file again would return XXXX.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << "XXXX";
  }
  std::ofstream(path, std::ios::app) << "cccc\n";
  auto next = read_new_lines(path, first->offset, first->file_id, 1 << 20);
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(next->lines, std::vector<std::string>{"cccc"});
  EXPECT_FALSE(next->reset);
}

TEST_F(RunIndexTest, NewLinesRestartsWhenTheOffsetCannotContinue) {
  const std::string path = dir_ + "/metrics.jsonl";
  write("metrics.jsonl", "one\ntwo\n");
  auto first = read_new_lines(path, 0, "", 1 << 20);
  ASSERT_TRUE(first.is_ok());
  for (uint64_t from : {uint64_t(9), uint64_t(1) << 40, uint64_t(2)}) {  // past the end, far past, mid-line
    auto r = read_new_lines(path, from, first->file_id, 1 << 20);
    ASSERT_TRUE(r.is_ok()) << from;
    EXPECT_TRUE(r->reset) << from;
    EXPECT_EQ(r->lines, (std::vector<std::string>{"one", "two"})) << from;
    EXPECT_EQ(r->offset, 8u);
  }
  auto at_end = read_new_lines(path, 8, first->file_id, 1 << 20);  // exactly at the end: nothing new
  ASSERT_TRUE(at_end.is_ok());
  EXPECT_FALSE(at_end->reset);
  EXPECT_TRUE(at_end->lines.empty());
  // A resume rewrites the log atomically (a new file under the same name), here longer than
  // the old offset: the file id tells.
  write("metrics.new", "uno\ndos\ntres\n");
  ASSERT_EQ(std::rename((dir_ + "/metrics.new").c_str(), path.c_str()), 0);
  auto replaced = read_new_lines(path, 8, first->file_id, 1 << 20);
  ASSERT_TRUE(replaced.is_ok());
  EXPECT_TRUE(replaced->reset);
  EXPECT_EQ(replaced->lines, (std::vector<std::string>{"uno", "dos", "tres"}));
  EXPECT_NE(replaced->file_id, first->file_id);
}

TEST_F(RunIndexTest, NewLinesStopsAtMaxBytesOnALineBoundary) {
  const std::string path = dir_ + "/metrics.jsonl";
  write("metrics.jsonl", "11\n22\n33\n");
  auto a = read_new_lines(path, 0, "", 7);  // "11\n22\n3": two lines, more to come
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->lines, (std::vector<std::string>{"11", "22"}));
  EXPECT_TRUE(a->more);
  auto b = read_new_lines(path, a->offset, a->file_id, 7);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->lines, std::vector<std::string>{"33"});
  EXPECT_FALSE(b->more);
  write("metrics.jsonl", std::string(100, 'x') + "\n");
  auto long_line = read_new_lines(path, 0, "", 10);
  ASSERT_FALSE(long_line.is_ok());
  EXPECT_EQ(long_line.status().code(), StatusCode::data_loss);
  EXPECT_NE(long_line.status().message().find("longer than 10 bytes"), std::string::npos);
}

TEST_F(RunIndexTest, NewLinesRefusesWhatIsNotAFile) {
  EXPECT_EQ(read_new_lines(dir_ + "/missing.jsonl", 0, "", 100).status().code(), StatusCode::not_found);
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0644), 0);
  // data_loss: not a regular file, refused at once (io::open_regular_file), never blocking.
  EXPECT_EQ(read_new_lines(dir_ + "/fifo", 0, "", 100).status().code(), StatusCode::data_loss);
}

TEST_F(RunIndexTest, JsonDepthIsBounded) {
  EXPECT_TRUE(json_depth_ok("{\"a\": [1, {\"b\": 2}]}"));
  EXPECT_TRUE(json_depth_ok(std::string(64, '[') + std::string(64, ']')));
  EXPECT_FALSE(json_depth_ok(std::string(65, '[') + std::string(65, ']')));
  EXPECT_TRUE(json_depth_ok("\"" + std::string(100, '[') + "\""));  // brackets in a string do not nest
}

}  // namespace
}  // namespace mixprec::runs
