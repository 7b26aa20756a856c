// hardware_test.cpp: include/mixprec/core/hardware.h against /proc/cpuinfo and against what the
// backend really does with each dtype.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "backend/onednn/half_emulation.h"
#include "core/cpu_features.h"
#include "mixprec/core/hardware.h"
#include "mixprec/core/tensor.h"

namespace mixprec {
namespace {

std::string cpuinfo_value(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (line.find_first_not_of(" \t", key.size()) != colon) continue;  // "model" vs "model name"
    return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "";
}

TEST(Hardware, ModelNameIsCpuinfosWithFamilyAndModel) {
  const std::string name = cpuinfo_value("model name");
  if (name.empty()) GTEST_SKIP() << "/proc/cpuinfo has no model name";
  EXPECT_EQ(cpu_model_name(), name + " (family " + cpuinfo_value("cpu family") + ", model " +
                                  cpuinfo_value("model") + ")");
}

TEST(Hardware, FeatureListNamesWhatWasDetected) {
  const std::string list = cpu_feature_list();
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(list.find("AVX2") != std::string::npos, f.avx2);
  EXPECT_EQ(list.find("AVX512F") != std::string::npos, f.avx512f);
  EXPECT_EQ(list.find("AMX-BF16") != std::string::npos, f.amx_bf16);
}

TEST(Hardware, NativeDtypesAreTheOnesTheBackendDoesNotEmulate) {
  EXPECT_TRUE(runs_natively(DType::f32));
  EXPECT_FALSE(runs_natively(DType::f16));  // oneDNN 2.6.3 has no f16 kernel on any CPU
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(d));
    const bool emulated = backend::onednn::is_emulated(Tensor::empty({1}, d));
    EXPECT_EQ(runs_natively(d), !emulated);
    const std::string path = compute_path(d);
    EXPECT_EQ(path.rfind(std::string(dtype_name(d)) + ": ", 0), 0u) << path;
    EXPECT_EQ(path.find("emulated") != std::string::npos, emulated) << path;
  }
  // oneDNN 2.6 has bf16 kernels exactly from AVX-512 (avx512_core) on.
  EXPECT_EQ(runs_natively(DType::bf16), cpu_features().avx512bw);
}

}  // namespace
}  // namespace mixprec
