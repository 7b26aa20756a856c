// policy.cpp: the autocast policy table (its rows come from include/mixprec/ops/ops.def), its
// overrides, and the list of where the ops' dtypes differ from PyTorch 1.13 on CPU.
// Source: PyTorch 1.13's CPU autocast as run by tests/golden/gen_autocast_table.py
// (tests/golden/data/autocast_dtypes_torch113.json): conv/linear/matmul/bmm lower, the
// losses fp32, everything else in the input dtype, mixed dtypes promoted. Deliberate
// departures (softmax, log_softmax, layer_norm, sum, mean in f32) are in kDifferences.
#include <array>
#include <atomic>
#include <cstdio>
#include <sstream>

#include "mixprec/amp/amp.h"

namespace mixprec::amp {

namespace {

struct PolicyRow {
  OpId op;
  const char* name;
  CastPolicy policy;
};

// Generated from include/mixprec/ops/ops.def (the reasons for each row's policy are there).
constexpr PolicyRow kPolicyTable[] = {
#define MIXPREC_OP(name, policy, torch113) {OpId::name, #name, CastPolicy::policy},
#include "mixprec/ops/ops.def"
#undef MIXPREC_OP
};

constexpr size_t kOpCount = size_t(OpId::count);
static_assert(std::size(kPolicyTable) == kOpCount, "every OpId has exactly one policy row");

// The reasons are repeated word for word in docs/amp.md (the test compares whole rows).
constexpr const char* kF32Accuracy =
    "accuracy: exponentials, variances and long sums in bf16 lose digits the next layer keeps; "
    "f32 as PyTorch does on CUDA, at a small cost on CPU";
constexpr const char* kMixedNorm =
    "PyTorch rejects bf16 weight and bias with f32 running statistics; mixprec's statistics "
    "are f64 whatever the dtypes";
constexpr const char* kF32Loss =
    "losses are f32 for 16-bit inputs even without autocast, so pure-bf16 training still "
    "reports and differentiates an f32 loss";

constexpr const char* kCpuLowers =
    "PyTorch 1.13 lowers it on CUDA only; mixprec lowers it on CPU too, as the matrix-matrix "
    "forms (16-bit operands halve a memory-bound product's traffic)";
constexpr const char* kOneDtype =
    "PyTorch 1.13 casts a bf16 input to the f32 operands' dtype here but raises in addmm and "
    "addbmm; mixprec asks one dtype of every add* op's operands";

constexpr const char* kTorch2Lowers =
    "PyTorch 1.13's CPU autocast leaves it alone; PyTorch 2's lowers it, as mixprec does";

constexpr const char* kNoBf16Deconv =
    "PyTorch 1.13 has no bf16 transposed convolution on CPU: its autocast runs it in f32 and "
    "a bf16 call fails; PyTorch 2 lowers it, as mixprec does";

constexpr TorchDifference kDifferences[] = {
    {OpId::softmax, "bf16_autocast", "bf16", "bf16", "f32", kF32Accuracy},
    {OpId::log_softmax, "bf16_autocast", "bf16", "bf16", "f32", kF32Accuracy},
    {OpId::layer_norm, "bf16_autocast", "bf16", "bf16", "f32", kF32Accuracy},
    {OpId::layer_norm, "bf16_autocast", "bf16_f32", "error", "f32",
     "PyTorch leaves layer_norm alone and then rejects a bf16 input with f32 weight"},
    {OpId::sum, "bf16_autocast", "bf16", "bf16", "f32", kF32Accuracy},
    {OpId::mean, "bf16_autocast", "bf16", "bf16", "f32", kF32Accuracy},
    {OpId::batch_norm, "bf16_autocast", "bf16", "error", "bf16", kMixedNorm},
    {OpId::layer_norm, "no_autocast", "bf16_f32", "error", "bf16",
     "PyTorch's kernel wants one dtype; mixprec accepts a bf16 activation through f32 "
     "parameters (O2)"},
    {OpId::batch_norm, "no_autocast", "bf16", "error", "bf16", kMixedNorm},
    {OpId::mse_loss, "no_autocast", "bf16", "error", "f32",
     "PyTorch has no bf16 mse kernel on CPU; mixprec computes every loss in f32"},
    {OpId::nll_loss, "no_autocast", "bf16", "bf16", "f32", kF32Loss},
    {OpId::cross_entropy, "no_autocast", "bf16", "bf16", "f32", kF32Loss},
    {OpId::mv, "bf16_autocast", "f32", "f32", "bf16", kCpuLowers},
    {OpId::mv, "bf16_autocast", "bf16_f32", "error", "bf16", kCpuLowers},
    {OpId::addmv, "bf16_autocast", "f32", "f32", "bf16", kCpuLowers},
    {OpId::addmv, "bf16_autocast", "bf16_f32", "f32", "bf16", kCpuLowers},
    {OpId::addmv, "no_autocast", "bf16_f32", "f32", "error", kOneDtype},
    {OpId::addr, "bf16_autocast", "f32", "f32", "bf16", kCpuLowers},
    {OpId::addr, "bf16_autocast", "bf16_f32", "f32", "bf16", kCpuLowers},
    {OpId::addr, "no_autocast", "bf16_f32", "f32", "error", kOneDtype},
    {OpId::baddbmm, "no_autocast", "bf16_f32", "f32", "error", kOneDtype},
    {OpId::chain_matmul, "bf16_autocast", "bf16_f32", "error", "bf16",
     "PyTorch 1.13 lowers only the mm calls inside chain_matmul, after checking that the "
     "matrices share a dtype; mixprec lowers the op's inputs, as its other lower rows"},
    {OpId::prelu, "bf16_autocast", "f32", "f32", "bf16", kTorch2Lowers},
    {OpId::conv_transpose1d, "bf16_autocast", "f32", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose1d, "bf16_autocast", "bf16", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose1d, "bf16_autocast", "bf16_f32", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose1d, "no_autocast", "bf16", "error", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose2d, "bf16_autocast", "f32", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose2d, "bf16_autocast", "bf16", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose2d, "bf16_autocast", "bf16_f32", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose2d, "no_autocast", "bf16", "error", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose3d, "bf16_autocast", "f32", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose3d, "bf16_autocast", "bf16", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose3d, "bf16_autocast", "bf16_f32", "f32", "bf16", kNoBf16Deconv},
    {OpId::conv_transpose3d, "no_autocast", "bf16", "error", "bf16", kNoBf16Deconv},
};

// -1: no override; otherwise the CastPolicy value. Atomics: overrides are set rarely, read
// by every op on every thread.
std::array<std::atomic<int>, kOpCount>& overrides() {
  static std::array<std::atomic<int>, kOpCount> o;
  static const bool initialised = [] {
    for (auto& x : o) x.store(-1);
    return true;
  }();
  (void)initialised;
  return o;
}

}  // namespace

const char* policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::lower: return "lower";
    case CastPolicy::fp32: return "fp32";
    case CastPolicy::promote: return "promote";
    case CastPolicy::keep: return "keep";
  }
  return "?";
}

const char* op_name(OpId op) { return size_t(op) < kOpCount ? kPolicyTable[size_t(op)].name : "?"; }

std::optional<OpId> parse_op(const std::string& name) {
  for (const auto& row : kPolicyTable)
    if (name == row.name) return row.op;
  return std::nullopt;
}

CastPolicy default_policy_for(OpId op) { return kPolicyTable[size_t(op)].policy; }

std::span<const TorchDifference> differences_from_pytorch() { return kDifferences; }

CastPolicy policy_for(OpId op) {
  const int o = overrides()[size_t(op)].load(std::memory_order_relaxed);
  return o < 0 ? default_policy_for(op) : CastPolicy(o);
}

void set_policy_override(OpId op, CastPolicy policy) { overrides()[size_t(op)].store(int(policy)); }

void clear_policy_overrides() {
  for (auto& x : overrides()) x.store(-1);
}

std::string policy_table_string() {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line, "%-28s %-8s %-10s %-10s %s\n", "op", "policy", "under bf16",
                "under f16", "note");
  os << line;
  for (const auto& row : kPolicyTable) {
    const CastPolicy p = policy_for(row.op);
    auto result = [p](DType ac) -> const char* {
      switch (p) {
        case CastPolicy::lower: return dtype_name(ac);
        case CastPolicy::fp32: return "f32";
        case CastPolicy::promote: return "widest";
        case CastPolicy::keep: return "input";
      }
      return "?";
    };
    std::snprintf(line, sizeof line, "%-28s %-8s %-10s %-10s %s\n", row.name, policy_name(p),
                  result(DType::bf16), result(DType::f16),
                  p != row.policy ? "(overridden)" : "");
    os << line;
  }
  os << "\nDifferences from PyTorch 1.13 on CPU (output dtype; \"error\": PyTorch raises)\n\n";
  std::snprintf(line, sizeof line, "%-14s %-14s %-9s %-8s %-8s %s\n", "op", "mode", "inputs",
                "pytorch", "mixprec", "why");
  os << line;
  for (const auto& d : kDifferences) {
    std::snprintf(line, sizeof line, "%-14s %-14s %-9s %-8s %-8s ", op_name(d.op), d.mode, d.inputs,
                  d.pytorch, d.mixprec);
    os << line << d.why << "\n";
  }
  os << "f16 autocast: PyTorch 1.13 cannot enter it on CPU (it raises); mixprec runs it with the "
        "same table.\n";
  return os.str();
}

}  // namespace mixprec::amp
