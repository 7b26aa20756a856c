// cpu_features.h: what this CPU can do, asked once via CPUID (and AMX permission from the
// kernel). Kernels pick their path from here; `mixprec train` prints it at start.
#pragma once
#include <string>

// For kernels written once and built for two ISAs: the body is MIXPREC_ALWAYS_INLINE and
// called from a __attribute__((target("avx512f"...))) wrapper and a baseline wrapper, so
// it is compiled inside each (inlining into a wider target is allowed), and the caller
// picks a wrapper from cpu_features().
#define MIXPREC_ALWAYS_INLINE inline __attribute__((always_inline))

namespace mixprec {

struct CpuFeatures {
  bool avx2 = false;  // 256-bit integer lanes (bf16 conversions, fused relu+pool, optimizer)
  bool fma = false;   // FMA3: a*b+c rounded once (the optimizer formulas PyTorch fuses)
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;  // 8/16-bit lanes (the 16-bit storage kernels' integer selects)
  bool avx512vl = false;  // AVX-512 instructions on 128/256-bit registers
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool amx_bf16 = false;
};

const CpuFeatures& cpu_features();
std::string cpu_features_string();  // "AVX2 FMA F16C AVX512F AVX512-BF16 AVX512-FP16 AMX-BF16"

}  // namespace mixprec
