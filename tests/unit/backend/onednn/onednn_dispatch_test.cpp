// onednn_dispatch_test.cpp: MIXPREC_VERBOSE=dispatch makes the oneDNN backend print which
// implementation each kernel got, once per distinct line.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/kernels.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

// Set before any test runs: the backend reads the variable once.
const int kVerboseSet = (setenv("MIXPREC_VERBOSE", "dispatch", 1), 0);

namespace onednn = backend::onednn;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(OneDnnDispatch, LogsImplementationOncePerKernel) {
  (void)kVerboseSet;
  Tensor x = test::random_input({2, 16, 6, 6}, DType::f32, 1, MemoryFormat::channels_last);
  Tensor w = test::random_input({16, 16, 3, 3}, DType::f32, 2);
  ::testing::internal::CaptureStderr();
  onednn::conv2d_forward(x, w, Tensor(), backend::Conv2dParams{});
  onednn::conv2d_forward(x, w, Tensor(), backend::Conv2dParams{});
  const std::string err = ::testing::internal::GetCapturedStderr();
  // e.g. "mixprec: dispatch conv2d_forward f32 -> brgconv:avx512_core (oneDNN)"
  EXPECT_EQ(count(err, "mixprec: dispatch conv2d_forward f32 -> "), 1) << err;
  EXPECT_NE(err.find(" (oneDNN)\n"), std::string::npos) << err;
  EXPECT_EQ(err.find("ref:"), std::string::npos) << "slow reference kernel chosen: " << err;
}

TEST(OneDnnDispatch, LogsEmulatedF16) {
  ::testing::internal::CaptureStderr();
  onednn::relu_forward(Tensor::zeros({4}, DType::f16));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("mixprec: dispatch relu_forward f16 -> f16 emulated on jit:"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace mixprec
