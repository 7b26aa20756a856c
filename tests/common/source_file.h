// source_file.h: a file of the source tree (models/*.yaml and the like) as text, for the
// tests that check what the repository ships. A missing or empty file fails the test. MIXPREC_SOURCE_DIR is set by tests/CMakeLists.txt.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace mixprec::test {

inline std::string source_file(const std::string& relative) {
  std::ifstream f(std::string(MIXPREC_SOURCE_DIR) + "/" + relative);
  std::stringstream ss;
  ss << f.rdbuf();
  if (ss.str().empty()) ADD_FAILURE() << "source file " << relative << " is missing or empty";  // never test nothing
  return ss.str();
}

}  // namespace mixprec::test
