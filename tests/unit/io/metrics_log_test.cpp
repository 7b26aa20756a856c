// metrics_log_test.cpp: metrics.jsonl as written by MetricsLog and read back by read_metrics
// (issue 13: no unit test). Every line is one JSON object; a non-finite loss is written as
// null and read back as NaN; a resume drops the records after the checkpoint's step; a
// partial last line (kill -9 mid-write) is dropped and flagged, a malformed earlier line is
// data_loss naming the line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/io/run_dir.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;

struct TempFile {
  fs::path dir = fs::temp_directory_path() / ("metrics_log_test_" + std::to_string(::getpid()));
  std::string path = (dir / "metrics.jsonl").string();
  TempFile() { fs::create_directories(dir); }
  ~TempFile() { fs::remove_all(dir); }
};

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(MetricsLog, EachRecordIsOneJsonLineWithTheDocumentedKeys) {
  TempFile t;
  {
    auto log = MetricsLog::open(t.path);
    ASSERT_TRUE(log.is_ok()) << log.status().message();
    ASSERT_TRUE((*log)->log_step(1, 0, 2.5, 1e-3, 65536, false, 0.25).is_ok());
    ASSERT_TRUE((*log)->log_step(2, 0, std::numeric_limits<double>::infinity(), 1e-3, 32768, true, 0.5).is_ok());
    ASSERT_TRUE((*log)->log_eval(2, 0, 0.875, 0.4, 0.125).is_ok());
    ASSERT_TRUE((*log)->log_eval(3, 0, 0.5, 0.6).is_ok());  // no duration given: no "seconds"
  }
  const auto text = lines(t.path);
  ASSERT_EQ(text.size(), 4u);
  const auto a = nlohmann::json::parse(text[0]);
  EXPECT_EQ(a.at("type"), "step");
  EXPECT_EQ(a.at("step"), 1);
  EXPECT_EQ(a.at("loss"), 2.5);
  EXPECT_EQ(a.at("scale"), 65536.0);
  EXPECT_EQ(a.at("skipped"), false);
  const auto b = nlohmann::json::parse(text[1]);
  EXPECT_TRUE(b.at("loss").is_null()) << text[1];  // JSON has no inf: null
  EXPECT_EQ(b.at("skipped"), true);
  const auto e = nlohmann::json::parse(text[2]);
  EXPECT_EQ(e.at("type"), "eval");
  EXPECT_EQ(e.at("accuracy"), 0.875);
  EXPECT_EQ(e.at("seconds"), 0.125);  // how long the evaluation took
  EXPECT_FALSE(nlohmann::json::parse(text[3]).contains("seconds"));

  auto back = read_metrics(t.path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back->records.size(), 4u);
  EXPECT_EQ(back->records[0].kind, MetricsRecord::Kind::step);
  EXPECT_EQ(back->records[0].lr, 1e-3);
  EXPECT_TRUE(std::isnan(back->records[1].loss));
  EXPECT_TRUE(back->records[1].skipped);
  EXPECT_EQ(back->records[2].kind, MetricsRecord::Kind::eval);
  EXPECT_EQ(back->records[2].accuracy, 0.875);
  EXPECT_FALSE(back->truncated_last_line);
}

// What the dashboard charts and lists: memory on every step line, and at a skipped step the
// tensors that overflowed (at most kMaxOverflowNames, with the full count), names that are
// not UTF-8 written with U+FFFD so that the line still parses; the reader keeps working.
TEST(MetricsLog, StepExtrasCarryMemoryAndTheOverflowingTensors) {
  TempFile t;
  MetricsLog::StepExtras plain;
  plain.memory_bytes = 1234;
  plain.peak_memory_bytes = 5678;
  plain.ranks = 2;  // a data-parallel run's lines say how many processes
  MetricsLog::StepExtras skipped = plain;
  skipped.ranks = 1;
  skipped.overflow_tensors = 10;
  for (int i = 0; i < 10; ++i) skipped.overflow.emplace_back("layer" + std::to_string(i) + ".weight", i + 1);
  skipped.overflow[1].first = "bad\xff\xfename";
  {
    auto log = MetricsLog::open(t.path);
    ASSERT_TRUE(log.is_ok()) << log.status().message();
    ASSERT_TRUE((*log)->log_step(1, 0, 2.5, 1e-3, 65536, false, 0.25, plain).is_ok());
    ASSERT_TRUE((*log)->log_step(2, 0, NAN, 1e-3, 32768, true, 0.5, skipped).is_ok());
    ASSERT_TRUE((*log)->log_step(3, 0, 2.0, 1e-3, 32768, false, 0.75).is_ok());  // no extras
  }
  const auto text = lines(t.path);
  ASSERT_EQ(text.size(), 3u);
  const auto a = nlohmann::json::parse(text[0]);
  EXPECT_EQ(a.at("memory_bytes"), 1234);
  EXPECT_EQ(a.at("peak_memory_bytes"), 5678);
  EXPECT_FALSE(a.contains("overflow"));
  EXPECT_EQ(a.at("ranks"), 2);
  const auto b = nlohmann::json::parse(text[1]);  // throws (fails) if the bad name broke the line
  ASSERT_EQ(b.at("overflow").size(), MetricsLog::kMaxOverflowNames);
  EXPECT_EQ(b.at("overflow")[0].at("tensor"), "layer0.weight");
  EXPECT_EQ(b.at("overflow")[0].at("values"), 1);
  EXPECT_EQ(b.at("overflow")[1].at("tensor"), "bad\xef\xbf\xbd\xef\xbf\xbdname");
  EXPECT_EQ(b.at("overflow_tensors"), 10);
  EXPECT_FALSE(b.contains("ranks"));  // one process: not written
  const auto c = nlohmann::json::parse(text[2]);
  EXPECT_FALSE(c.contains("memory_bytes"));
  auto back = read_metrics(t.path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back->records.size(), 3u);
  EXPECT_TRUE(back->records[1].skipped);
}

TEST(MetricsLog, ResumeDropsRecordsAfterTheCheckpointStep) {
  TempFile t;
  {
    auto log = MetricsLog::open(t.path);
    ASSERT_TRUE(log.is_ok());
    for (int s = 1; s <= 5; ++s) ASSERT_TRUE((*log)->log_step(s, 0, 1.0 / s, 1e-3, 1, false, s).is_ok());
  }
  {
    auto log = MetricsLog::open(t.path, /*keep_through_step=*/3);  // the checkpoint was at step 3
    ASSERT_TRUE(log.is_ok()) << log.status().message();
    ASSERT_TRUE((*log)->log_step(4, 0, 0.3, 1e-3, 1, false, 4).is_ok());
  }
  auto back = read_metrics(t.path);
  ASSERT_TRUE(back.is_ok());
  ASSERT_EQ(back->records.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back->records[size_t(i)].step, i + 1);
  EXPECT_EQ(back->records[3].loss, 0.3);  // the new step 4, not the old one
}

TEST(MetricsLog, PartialLastLineIsDroppedAndAMalformedEarlierLineIsDataLoss) {
  TempFile t;
  {
    std::ofstream out(t.path);
    out << R"({"type":"step","step":1,"epoch":0,"loss":1.0,"lr":0.001,"scale":1,"skipped":false,"time":0.1})" << "\n"
        << R"({"type":"step","step":2,"epoch":0,"lo)";  // killed mid-write
  }
  auto back = read_metrics(t.path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->records.size(), 1u);
  EXPECT_TRUE(back->truncated_last_line);
  {
    auto log = MetricsLog::open(t.path);  // appending first drops the partial line
    ASSERT_TRUE(log.is_ok()) << log.status().message();
    ASSERT_TRUE((*log)->log_step(2, 0, 0.5, 1e-3, 1, false, 0.2).is_ok());
  }
  const auto text = lines(t.path);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(text[1]).at("step"), 2);

  {
    std::ofstream out(t.path);
    out << "not json\n" << R"({"type":"step","step":1,"epoch":0,"loss":1.0,"lr":0.001,"scale":1,"skipped":false,"time":0.1})" << "\n";
  }
  auto bad = read_metrics(t.path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::data_loss);
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find(t.path), std::string::npos) << bad.status().message();
}

// Gradient-underflow telemetry (--underflow-every): an object on the steps that counted it,
// with totals, the tensor count and at most GradientUnderflow::kMaxNames worst tensors, names
// not UTF-8 written with U+FFFD; absent from other lines; the reader keeps working.
TEST(MetricsLog, StepExtrasCarryGradientUnderflow) {
  TempFile t;
  MetricsLog::StepExtras counted;
  GradientUnderflow u;
  u.values = 1000;
  u.subnormal = 40;
  u.flushed = 7;
  u.tensors = 11;
  for (int i = 0; i < 11; ++i) u.worst.push_back({"layer" + std::to_string(i) + ".weight", 100, 11 - i, i % 2});
  u.worst[2].name = "<script>\xff</script>";
  counted.underflow = u;
  {
    auto log = MetricsLog::open(t.path);
    ASSERT_TRUE(log.is_ok()) << log.status().message();
    ASSERT_TRUE((*log)->log_step(1, 0, 2.5, 1e-3, 65536, false, 0.25, counted).is_ok());
    ASSERT_TRUE((*log)->log_step(2, 0, 2.4, 1e-3, 65536, false, 0.5, MetricsLog::StepExtras()).is_ok());
  }
  const auto text = lines(t.path);
  ASSERT_EQ(text.size(), 2u);
  const auto a = nlohmann::json::parse(text[0]);
  const auto& g = a.at("grad_underflow");
  EXPECT_EQ(g.at("dtype"), "f16");
  EXPECT_EQ(g.at("values"), 1000);
  EXPECT_EQ(g.at("subnormal"), 40);
  EXPECT_EQ(g.at("flushed"), 7);
  EXPECT_EQ(g.at("tensors"), 11);
  ASSERT_EQ(g.at("worst").size(), GradientUnderflow::kMaxNames);
  EXPECT_EQ(g.at("worst")[0].at("tensor"), "layer0.weight");
  EXPECT_EQ(g.at("worst")[0].at("values"), 100);
  EXPECT_EQ(g.at("worst")[0].at("subnormal"), 11);
  EXPECT_EQ(g.at("worst")[1].at("flushed"), 1);
  EXPECT_EQ(g.at("worst")[2].at("tensor"), "<script>\xef\xbf\xbd</script>");
  EXPECT_FALSE(nlohmann::json::parse(text[1]).contains("grad_underflow"));
  auto back = read_metrics(t.path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->records.size(), 2u);
}

}  // namespace
}  // namespace mixprec
