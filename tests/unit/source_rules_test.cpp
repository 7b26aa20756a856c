// source_rules_test.cpp: the structural rules of docs/design.md that no compiler checks,
// read from the sources (op routes are op_route_test's):
// - a file over 400 lines says why in its header comment ("Longer than 400 lines" or "Long
//   because"), so growth is a decision, not an accident;
// - tools/ (the CLI) and bench/ include only the public headers in include/mixprec and their own;
// - no file is named for where it grew rather than what it holds ("_extra", "_misc", "_util2").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kSource = MIXPREC_SOURCE_DIR;

std::vector<fs::path> code_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".cpp" || e.path().extension() == ".h") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(SourceRules, LongFilesSayWhy) {
  int long_files = 0, files = 0;
  for (const char* dir : {"src", "include", "tools", "tests", "bench"}) {
    for (const fs::path& p : code_files(kSource / dir)) {
      ++files;
      const auto lines = lines_of(p);
      if (lines.size() <= 400) continue;
      ++long_files;
      std::string header;
      for (size_t i = 0; i < lines.size() && i < 40 && (lines[i].rfind("//", 0) == 0 || lines[i].empty()); ++i)
        header += lines[i] + "\n";
      EXPECT_TRUE(header.find("Longer than 400 lines") != std::string::npos ||
                  header.find("Long because") != std::string::npos)
          << fs::relative(p, kSource) << " has " << lines.size()
          << " lines and no reason in its header comment: split it by meaning or say why it is one file";
    }
  }
  EXPECT_GT(files, 200);  // the walk found the sources
  EXPECT_GT(long_files, 0);  // and the rule has something to check today
}

TEST(SourceRules, ToolsAndBenchmarksIncludeOnlyPublicHeaders) {
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  int checked = 0;
  for (const char* dir : {"tools", "bench"}) {
    for (const fs::path& p : code_files(kSource / dir)) {
      const auto lines = lines_of(p);
      for (size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        if (!std::regex_search(lines[i], m, include)) continue;
        ++checked;
        const std::string h = m[1];
        const bool public_header = h.rfind("mixprec/", 0) == 0;
        // Its own headers: beside it (tools), or named from the checkout (bench/phased_step.h).
        const bool own = fs::exists(p.parent_path() / h) || (h.rfind("bench/", 0) == 0 && fs::exists(kSource / h));
        EXPECT_TRUE(public_header || own) << fs::relative(p, kSource) << ":" << i + 1 << " includes \"" << h
                                          << "\", a private header of the library: make what it needs public";
      }
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(SourceRules, FilesAreNamedForWhatTheyHold) {
  const std::regex vague(R"(_(extra|misc|more|other|stuff)\.(cpp|h)$)");
  for (const char* dir : {"src", "include", "tools"})
    for (const fs::path& p : code_files(kSource / dir))
      EXPECT_FALSE(std::regex_search(p.filename().string(), vague)) << fs::relative(p, kSource);
}

}  // namespace
