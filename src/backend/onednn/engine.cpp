// backend/onednn/engine.cpp: the global CPU engine and stream (see engine.h).
#include "backend/onednn/engine.h"

#include <omp.h>

#include "backend/onednn/half_emulation.h"
#include "core/cpu_features.h"
#include "mixprec/core/hardware.h"

namespace mixprec::backend::onednn {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

namespace {
const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}
}  // namespace

std::string engine_description() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", isa " + isa_name(dnnl::get_effective_cpu_isa()) + ", " +
         std::to_string(omp_get_max_threads()) + " threads";
}

}  // namespace mixprec::backend::onednn

// ---- include/mixprec/core/hardware.h: the parts that need oneDNN's view of the CPU ------------
namespace mixprec {

bool runs_natively(DType dtype) {
  switch (dtype) {
    case DType::f32: return true;
    case DType::bf16: return backend::onednn::has_native_bf16();
    default: return false;  // f16: oneDNN 2.6.3 has no f16 kernel on any CPU; f64: backend/ref
  }
}

std::string compute_path(DType dtype) {
  const std::string name = dtype_name(dtype);
  const CpuFeatures& cpu = cpu_features();
  switch (dtype) {
    case DType::f32: return name + ": " + backend::onednn::engine_description();
    case DType::bf16:
      if (cpu.amx_bf16 && runs_natively(dtype)) return name + ": oneDNN native (AMX-BF16 tiles)";
      if (cpu.avx512_bf16 && runs_natively(dtype)) return name + ": oneDNN native (AVX512-BF16)";
      if (runs_natively(dtype))
        return name + ": oneDNN native (AVX-512 without BF16 instructions: oneDNN converts in its kernels)";
      return name + ": emulated on f32 kernels (no AVX-512, so oneDNN has no bf16 kernels): no " +
             "speed-up over fp32 here, activations still take half the memory";
    case DType::f16:
      return name + ": emulated on f32 kernels (oneDNN 2.6 has no f16 kernels" +
             std::string(cpu.avx512_fp16 ? "; AVX512-FP16 is present but unused" : "") +
             "): no speed-up over fp32, activations still take half the memory";
    default: return name + ": backend/ref (naive float64 loops, tests only)";
  }
}

}  // namespace mixprec
