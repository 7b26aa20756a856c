// backend/onednn/kernel_report.h: what oneDNN runs the matrix work on, on this CPU, for
// banners (`mixprec train`) and docs. Free of dnnl.hpp so that the CLI can include it: every
// oneDNN call stays inside src/backend/onednn.
#pragma once
#include <string>

namespace mixprec::backend::onednn {

struct KernelReport {
  std::string version;  // "2.6.3"
  std::string isa;      // oneDNN's effective ISA: "avx2", "avx512_core_amx", ...
  // Implementation oneDNN picks for a small matmul and 3x3 convolution forward in each
  // dtype ("brg:avx512_core_amx_bf16", "gemm:jit", ...); "" when it has none (then mixprec
  // falls back: f16 is emulated on the f32 kernels, bf16 runs on the reference loops).
  std::string f32_matmul, f32_conv, bf16_matmul, bf16_conv, f16_matmul, f16_conv;
};

// Probed once (primitive descriptors only: nothing executes), then cached.
const KernelReport& kernel_report();

}  // namespace mixprec::backend::onednn
