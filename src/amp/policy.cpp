// policy.cpp: the autocast policy table, one row per op, and its overrides.
// Source: PyTorch's autocast op lists (CUDA lists for softmax/layer_norm/sum, which
// PyTorch's CPU lists leave in the input dtype; we keep them in f32 on CPU too: docs/amp.md).
#include <array>
#include <atomic>
#include <cstdio>
#include <sstream>

#include "mixprec/amp.h"

namespace mixprec::amp {

namespace {

struct PolicyRow {
  OpId op;
  const char* name;
  CastPolicy policy;
};

constexpr PolicyRow kPolicyTable[] = {
    {OpId::conv2d, "conv2d", CastPolicy::lower},
    {OpId::linear, "linear", CastPolicy::lower},
    {OpId::matmul, "matmul", CastPolicy::lower},
    {OpId::bmm, "bmm", CastPolicy::lower},
    {OpId::softmax, "softmax", CastPolicy::fp32},
    {OpId::log_softmax, "log_softmax", CastPolicy::fp32},
    {OpId::layer_norm, "layer_norm", CastPolicy::fp32},
    {OpId::batch_norm, "batch_norm", CastPolicy::fp32},
    {OpId::exp, "exp", CastPolicy::fp32},
    {OpId::log, "log", CastPolicy::fp32},
    {OpId::pow, "pow", CastPolicy::fp32},
    {OpId::sum, "sum", CastPolicy::fp32},
    {OpId::mean, "mean", CastPolicy::fp32},
    {OpId::mse_loss, "mse_loss", CastPolicy::fp32},
    {OpId::nll_loss, "nll_loss", CastPolicy::fp32},
    {OpId::cross_entropy, "cross_entropy", CastPolicy::fp32},
    {OpId::add, "add", CastPolicy::promote},
    {OpId::sub, "sub", CastPolicy::promote},
    {OpId::mul, "mul", CastPolicy::promote},
    {OpId::div, "div", CastPolicy::promote},
    {OpId::cat, "cat", CastPolicy::promote},
    {OpId::stack, "stack", CastPolicy::promote},
    {OpId::relu, "relu", CastPolicy::keep},
    {OpId::gelu, "gelu", CastPolicy::keep},
    {OpId::max_pool2d, "max_pool2d", CastPolicy::keep},
    {OpId::avg_pool2d, "avg_pool2d", CastPolicy::keep},
    {OpId::dropout, "dropout", CastPolicy::keep},
    {OpId::reshape, "reshape", CastPolicy::keep},
    {OpId::flatten, "flatten", CastPolicy::keep},
    {OpId::transpose, "transpose", CastPolicy::keep},
    {OpId::neg, "neg", CastPolicy::keep},
};

constexpr size_t kOpCount = size_t(OpId::count);
static_assert(std::size(kPolicyTable) == kOpCount, "every OpId needs exactly one policy row");

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kPolicyTable); ++i)
    if (size_t(kPolicyTable[i].op) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "policy rows must follow the OpId order");

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
  std::snprintf(line, sizeof line, "%-14s %-8s %-10s %-10s %s\n", "op", "policy", "f32 in bf16",
                "f32 in f16", "note");
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
    std::snprintf(line, sizeof line, "%-14s %-8s %-10s %-10s %s\n", row.name, policy_name(p),
                  result(DType::bf16), result(DType::f16),
                  p != row.policy ? "(overridden)" : "");
    os << line;
  }
  return os.str();
}

}  // namespace mixprec::amp
