// infer_load_model_test.cpp: what opening a checkpoint that cannot be used says. A missing file, a
// file that is not a checkpoint and an unknown precision must be Status errors (never an
// exception or a crash) of the documented code, naming the file or the setting at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "mixprec/infer/infer.h"

namespace mixprec::infer {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "mixprec_infer_load_model_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

TEST(LoadModel, MissingFileIsACheckpointErrorNamingIt) {
  const std::string path = temp_path("no-such-run/model.safetensors");
  auto loaded = load_model(path, "");
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::bad_checkpoint);
  EXPECT_NE(loaded.status().message().find(path), std::string::npos) << loaded.status().message();

  auto predictor = Predictor::open(path, "bf16");  // the same error through the Predictor
  ASSERT_FALSE(predictor.is_ok());
  EXPECT_EQ(predictor.status().code(), StatusCode::bad_checkpoint);
  EXPECT_NE(predictor.status().message().find(path), std::string::npos) << predictor.status().message();
}

TEST(LoadModel, AFileThatIsNoCheckpointIsACheckpointErrorNamingIt) {
  const std::string path = temp_path("notes.safetensors");
  std::ofstream(path) << "these are my notes, not a safetensors file\n";
  auto loaded = load_model(path, "");
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::bad_checkpoint);
  EXPECT_NE(loaded.status().message().find(path), std::string::npos) << loaded.status().message();

  auto opened = open_weights(path);  // open_weights keeps the reader's own code
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find(path), std::string::npos) << opened.status().message();
}

TEST(LoadModel, AnEmptyRunDirectoryIsACheckpointErrorNamingIt) {
  const std::string dir = temp_path("empty-run");
  fs::create_directories(dir);
  auto loaded = load_model(dir, "");
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::bad_checkpoint);
  EXPECT_NE(loaded.status().message().find(dir), std::string::npos) << loaded.status().message();
}

}  // namespace
}  // namespace mixprec::infer
