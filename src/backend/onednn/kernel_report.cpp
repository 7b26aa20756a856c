// backend/onednn/kernel_report.cpp: see kernel_report.h.
#include "backend/onednn/kernel_report.h"

#include "backend/onednn/engine.h"

namespace mixprec::backend::onednn {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

std::string probe_matmul(dt type) {
  try {
    const dnnl::memory::desc md({64, 64}, type, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), cpu_engine());
    return pd.impl_info_str();
  } catch (const dnnl::error&) {
    return "";  // unimplemented for this dtype on this CPU
  }
}

std::string probe_conv(dt type) {
  try {
    // The shape of the CNN's second convolution (32 -> 64 channels, 3x3, 14x14).
    const dnnl::memory::desc src({16, 32, 14, 14}, type, tag::any);
    const dnnl::memory::desc weights({64, 32, 3, 3}, type, tag::any);
    const dnnl::memory::desc dst({16, 64, 14, 14}, type, tag::any);
    using fwd = dnnl::convolution_forward;
    fwd::primitive_desc pd(fwd::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                     src, weights, dst, {1, 1}, {1, 1}, {1, 1}),
                           cpu_engine());
    return pd.impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
}

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

const KernelReport& kernel_report() {
  static const KernelReport report = [] {
    KernelReport r;
    const dnnl_version_t* v = dnnl_version();
    r.version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    r.isa = isa_name(dnnl::get_effective_cpu_isa());
    r.f32_matmul = probe_matmul(dt::f32);
    r.f32_conv = probe_conv(dt::f32);
    r.bf16_matmul = probe_matmul(dt::bf16);
    r.bf16_conv = probe_conv(dt::bf16);
    r.f16_matmul = probe_matmul(dt::f16);
    r.f16_conv = probe_conv(dt::f16);
    return r;
  }();
  return report;
}

}  // namespace mixprec::backend::onednn
