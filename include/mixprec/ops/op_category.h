// op_category.h: the names of the autocast policy table's rows (amp::OpId) and of its four
// policies (amp::CastPolicy), apart from the autocast machinery in amp.h. An op names the
// row it consults with these; src/ops asks the table through the narrow interface in
// src/ops/autocast_hook.h, so the ops layer includes no amp header (amp sits above ops).
#pragma once
#include <cstdint>

namespace mixprec::amp {

// What autocast does to an op's floating inputs (f64 and integer inputs are never cast).
// After the cast the op runs exactly as it does outside autocast on those inputs (its own
// internals are not autocast again), so the table alone decides an op's autocast dtypes.
enum class CastPolicy : uint8_t {
  lower,    // to the autocast dtype (bf16/f16): matrix work, where 16 bits pay
  fp32,     // to f32: precision-sensitive ops (softmax, layer_norm, reductions, losses)
  promote,  // to the widest floating dtype among the inputs: mixed-input elementwise ops
  keep,     // as they are: the op runs in its input dtype (as PyTorch's CPU autocast does
            // for every op on neither of its lists)
};

// Every row of the policy table, in the order of include/mixprec/ops/ops.def (the one list of
// ops: name, policy, PyTorch case). Every op consults its own row (and only its own: an op
// built from others, such as flatten or mse_loss, runs them without autocast after its
// cast); tests/unit/amp/autocast_table_test.cpp checks each row against the registered ops
// that consult it, and the op registry (src/ops/registry.h) names the row of each entry.
enum class OpId : uint16_t {
#define MIXPREC_OP(name, policy, torch113) name,
#include "mixprec/ops/ops.def"
#undef MIXPREC_OP
  count
};

}  // namespace mixprec::amp
