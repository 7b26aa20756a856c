// fuzz_corpus_replay_test.cpp: every seed (tests/fuzz/corpus/<harness>/) and every input that
// ever crashed a fuzz harness (tests/fuzz/crashers/<harness>/) through the same target the
// harness runs (tests/fuzz/fuzz_targets.h), in the ordinary build: the parser must refuse
// with its documented Status code or accept, never crash, throw or break the round trip.
// Seeds named valid_* must be accepted, so the corpus really reaches past validation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using Target = fuzz::Violation (*)(const uint8_t*, size_t, bool*);

struct Harness {
  const char* name;
  Target target;
};
const Harness kHarnesses[] = {{"safetensors", fuzz::safetensors},
                              {"checkpoint", fuzz::checkpoint},
                              {"config_json", fuzz::config_json},
                              {"idx", fuzz::idx},
                              {"cifar", fuzz::cifar},
                              {"npy", fuzz::npy},
                              {"image", fuzz::image},
                              {"csv", fuzz::csv},
                              {"model_file", fuzz::model_file},
                              {"serve_request", fuzz::serve_request},
                              {"http_request", fuzz::http_request},
                              {"experiment_file", fuzz::experiment_file}};

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Replays dir/<harness>/*; returns how many files it fed.
int replay(const Harness& h, const std::string& dir, bool check_valid) {
  const fs::path d = fs::path(MIXPREC_SOURCE_DIR) / "tests/fuzz" / dir / h.name;
  if (!fs::is_directory(d)) return 0;
  int n = 0;
  for (const auto& e : fs::directory_iterator(d)) {
    if (!e.is_regular_file()) continue;
    const std::vector<uint8_t> bytes = read_all(e.path());
    bool accepted = false;
    const fuzz::Violation v = h.target(bytes.data(), bytes.size(), &accepted);
    EXPECT_TRUE(v.empty()) << e.path() << ": " << v;
    if (check_valid && e.path().filename().string().rfind("valid_", 0) == 0)
      EXPECT_TRUE(accepted) << e.path() << ": a valid_* seed was refused";
    ++n;
  }
  return n;
}

TEST(FuzzCorpusReplay, EverySeedIsHandledAndValidSeedsAreAccepted) {
  for (const Harness& h : kHarnesses) {
    SCOPED_TRACE(h.name);
    EXPECT_GE(replay(h, "corpus", /*check_valid=*/true), 3) << "seed corpus of " << h.name << " is missing";
  }
}

TEST(FuzzCorpusReplay, EveryRecordedCrasherIsNowHandled) {
  int total = 0;
  for (const Harness& h : kHarnesses) {
    SCOPED_TRACE(h.name);
    total += replay(h, "crashers", /*check_valid=*/false);
  }
  RecordProperty("crashers", total);
}

}  // namespace
}  // namespace mixprec
