// hardware.h: what this CPU offers mixed precision, for banners, reports and benchmarks:
// its model name, the vector features mixprec detected (and uses), and how each floating
// dtype is computed here: natively by oneDNN, or emulated on its f32 kernels (16-bit values
// widened exactly, f32 accumulation, outputs rounded once: a native kernel's numerics,
// without its speed).
#pragma once
#include <string>

#include "mixprec/core/dtype.h"

namespace mixprec {

// "AMD EPYC 7B13 (family 25, model 1)": /proc/cpuinfo's model name with the family and
// model numbers (virtual machines often report a generic name); "unknown CPU" without it.
std::string cpu_model_name();
// The detected features mixprec uses, e.g. "AVX2 FMA F16C" or
// "AVX2 FMA F16C AVX512F AVX512-BF16 AVX512-FP16 AMX-BF16"; "none" when there are none.
std::string cpu_feature_list();
// Both, with what is missing for fast 16-bit training, in words a user can check:
// "AMD EPYC (family 25, model 1): AVX2 FMA F16C (no AVX-512, no AMX)".
std::string cpu_summary();
// True when the oneDNN backend has kernels for dtype on this CPU (f32 always; bf16 from
// AVX-512 on; f16 never in oneDNN 2.6, which mixprec emulates everywhere).
bool runs_natively(DType dtype);
// One line for a banner, e.g. "bf16: oneDNN native (AMX-BF16 tiles)" or
// "bf16: emulated on f32 kernels (no AVX-512, so oneDNN has no bf16 kernels): no speed-up
// over fp32 here, activations still half the memory".
std::string compute_path(DType dtype);

// The most threads a command accepts for --threads: 4x the cores this process may use, at
// least 8. More would only oversubscribe (and OpenMP's per-thread stacks are not free: a
// thread count in the thousands exhausted memory and crashed bench).
int max_thread_count();

}  // namespace mixprec
