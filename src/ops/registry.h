// registry.h: every op of the functional API, listed once (the list tests iterate over).
// An entry holds what a test needs to check the op without knowing it:
// - its name and the autocast row it consults (amp::OpId; none for the three ops that are
//   not autocast ops: cast and to_memory_format change dtype/layout by request, argmax
//   returns indices), so the harness can check the output dtype against the policy table;
// - how to call it through the public API (`run`), on inputs made from `inputs`;
// - a float64 reference (`reference`, backend/ref: the kernel contract's ref functions or
//   backend/ref/op_reference.h), computed from the same input values;
// - which dtypes it supports and how it is differentiable.
// Adding an op: its row goes in include/mixprec/ops/ops.def and its entry in registry.cpp, in
// its family's block (a MIXPREC_UNARY_OP's or MIXPREC_BINARY_OP's entry comes from its
// ops.def line); the op harness
// (tests/unit/ops/op_harness_test.cpp) then checks forward in f32/bf16/f16 against the
// reference, gradients by finite differences in f64, and autocast dtypes for every policy.
// tests/unit/ops/op_route_test.cpp fails for a public op without an entry, an entry naming
// no public op, and an op whose kernel call bypasses ops/dispatch.h.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "mixprec/ops/op_category.h"
#include "mixprec/core/tensor.h"

namespace mixprec::registry {

// One input: a floating tensor with uniform values in [low, high), or (classes > 0) an i64
// tensor of class indices in [0, classes) (a loss target: never cast, no gradient).
struct InputSpec {
  Shape shape;
  double low = -1.0, high = 1.0;
  bool needs_grad = true;  // checked by finite differences
  int64_t classes = 0;
};

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpEntry {
  // The public function, exactly (op_route_test matches it against include/mixprec), or
  // "<function>.<variant>" for another case of the same function ("matmul.3d").
  const char* name;
  std::optional<amp::OpId> category;  // the policy row it consults; none: not an autocast op
  std::vector<InputSpec> inputs;
  OpFn run;        // the op through the public API
  OpFn reference;  // float64 result from the same values (any dtype in, f64 out)
  bool half = true;            // runs on bf16 and f16 inputs
  bool differentiable = true;  // records autograd (gradient check in f64)
  bool f32_for_half = false;   // 16-bit inputs give an f32 output (the losses)
  double tolerance = 1.0;      // multiplies the harness's per-dtype tolerance
  // Rows the call consults besides `category`: a fused op that applies two rows
  // (relu_max_pool2d: relu's, then max_pool2d's) or a case that composes ops. The autocast
  // table test overrides every other row to check that none leaks in.
  std::vector<amp::OpId> also_consults = {};
};

// The public function an entry calls: its name up to the variant's '.'.
std::string_view function_of(const OpEntry& e);

const std::vector<OpEntry>& all_ops();
const OpEntry* find_op(std::string_view name);

}  // namespace mixprec::registry
