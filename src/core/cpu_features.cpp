// cpu_features.cpp: CPUID + XGETBV, asked once. A feature counts only if the CPU has it AND
// the OS saves its register state (XCR0), since using AVX-512 registers the kernel doesn't
// context-switch would corrupt them. AMX additionally needs a per-process permission
// request on Linux (arch_prctl ARCH_REQ_XCOMP_PERM) before the first tile instruction.
//
// MIXPREC_CPU_DISABLE=avx512f,f16c,... switches features off (names as in the struct), so
// tests and benchmarks can exercise the fallback paths on a machine that has everything.
#include "core/cpu_features.h"
#include "mixprec/core/hardware.h"

#include <cpuid.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string_view>

namespace mixprec {
namespace {

struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
  return r;
}

bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

uint64_t read_xcr0() {
  unsigned eax = 0, edx = 0;
  // Inline asm rather than _xgetbv so this file needs no -mxsave.
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
#ifdef SYS_arch_prctl
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

bool disabled_by_env(std::string_view name) {
  const char* env = std::getenv("MIXPREC_CPU_DISABLE");
  if (env == nullptr) return false;
  std::string_view list(env);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

CpuFeatures detect() {
  CpuFeatures f;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return f;
  const CpuidRegs leaf1 = cpuid(1, 0);
  const bool osxsave = bit(leaf1.ecx, 27);
  if (!osxsave) return f;  // no XGETBV: the OS enables nothing beyond SSE for us
  const uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM + YMM state
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;        // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG + XTILEDATA

  f.f16c = os_avx && bit(leaf1.ecx, 28) && bit(leaf1.ecx, 29);  // AVX + F16C
  f.fma = os_avx && bit(leaf1.ecx, 28) && bit(leaf1.ecx, 12);   // AVX + FMA3
  if (max_leaf >= 7) {
    const CpuidRegs leaf7 = cpuid(7, 0);
    const CpuidRegs leaf7_1 = cpuid(7, 1);
    f.avx2 = os_avx && bit(leaf7.ebx, 5);
    f.avx512f = os_avx512 && bit(leaf7.ebx, 16);
    f.avx512bw = f.avx512f && bit(leaf7.ebx, 30);
    f.avx512vl = f.avx512f && bit(leaf7.ebx, 31);
    f.avx512_bf16 = f.avx512f && bit(leaf7_1.eax, 5);
    f.avx512_fp16 = f.avx512f && bit(leaf7.edx, 23);
    const bool amx_tile = bit(leaf7.edx, 24);
    f.amx_bf16 = os_amx && amx_tile && bit(leaf7.edx, 22);
  }

  if (disabled_by_env("avx2")) f.avx2 = false;
  if (disabled_by_env("fma")) f.fma = false;
  if (disabled_by_env("f16c")) f.f16c = false;
  if (disabled_by_env("avx512f")) f.avx512f = false;
  if (disabled_by_env("avx512bw") || !f.avx512f) f.avx512bw = false;
  if (disabled_by_env("avx512vl") || !f.avx512f) f.avx512vl = false;
  if (disabled_by_env("avx512_bf16") || !f.avx512f) f.avx512_bf16 = false;
  if (disabled_by_env("avx512_fp16") || !f.avx512f) f.avx512_fp16 = false;
  if (disabled_by_env("amx_bf16")) f.amx_bf16 = false;
  // Ask last, and only if we would use it: the permission enlarges every signal frame.
  if (f.amx_bf16) f.amx_bf16 = request_amx_permission();
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();  // thread-safe one-time init
  return features;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "AVX2");
  add(f.fma, "FMA");
  add(f.f16c, "F16C");
  add(f.avx512f, "AVX512F");
  add(f.avx512_bf16, "AVX512-BF16");
  add(f.avx512_fp16, "AVX512-FP16");
  add(f.amx_bf16, "AMX-BF16");
  return s.empty() ? std::string("none") : s;
}

std::string cpu_feature_list() { return cpu_features_string(); }

// "AMD EPYC (family 25, model 1)": the family and model tell CPU generations apart where a
// virtual machine reports only a generic name (this one's Zen3 and a Zen5 both say "AMD EPYC").
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string name, family, model;
  auto value = [](const std::string& line) {
    const size_t colon = line.find(':');
    const size_t start = colon == std::string::npos ? colon : line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  for (std::string line; std::getline(in, line) && line.find_first_not_of(" \t") != std::string::npos;) {
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model", 0) == 0 && line.find(':') < line.find("name")) model = value(line);
  }
  if (name.empty()) return "unknown CPU";
  if (!family.empty() && !model.empty()) name += " (family " + family + ", model " + model + ")";
  return name;
}

std::string cpu_summary() {
  const CpuFeatures& f = cpu_features();
  std::string missing;
  if (!f.avx512f) missing += "no AVX-512";
  else if (!f.avx512_bf16) missing += "no AVX512-BF16";
  if (!f.amx_bf16) missing += std::string(missing.empty() ? "" : ", ") + "no AMX";
  std::string s = cpu_model_name() + ": " + cpu_feature_list();
  return missing.empty() ? s : s + " (" + missing + ")";
}

int max_thread_count() {
  // The cores this process may run on (its affinity mask, as OpenMP counts them), not the
  // machine's: under taskset or a container's cpuset the bound follows what is usable.
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : int(sysconf(_SC_NPROCESSORS_ONLN));
  return std::max(8, 4 * std::max(cores, 1));
}

}  // namespace mixprec
