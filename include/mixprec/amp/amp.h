// amp.h: automatic mixed precision: the autocast mode and its op policy table.
// Semantics follow torch.autocast (CPU default dtype bf16); differences are in docs/amp.md.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/ops/op_category.h"
#include "mixprec/core/tensor.h"

namespace mixprec::amp {

const char* policy_name(CastPolicy p);

// OpId (the table's rows) and CastPolicy are in mixprec/ops/op_category.h.
const char* op_name(OpId op);
std::optional<OpId> parse_op(const std::string& name);
// The table's policy, or the override set for this op.
CastPolicy policy_for(OpId op);
CastPolicy default_policy_for(OpId op);
// Changes an op's policy process-wide (e.g. keep softmax in bf16 as PyTorch's CPU list does).
void set_policy_override(OpId op, CastPolicy policy);
void clear_policy_overrides();

// ---- autocast mode (thread-local, nests) ----
struct AutocastState {
  bool enabled = false;
  DType dtype = DType::bf16;
  bool cache_enabled = true;
};
AutocastState autocast_state();
bool is_autocast_enabled();
DType autocast_dtype();

// Enters an autocast region for the current thread; restores the previous state when it
// goes out of scope (also when an exception leaves the region). Leaving the outermost
// region clears the weight-cast cache. `enabled = false` switches autocast off inside an
// enabled region (one layer in f32).
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = DType::bf16, bool enabled = true, bool cache_enabled = true);
  explicit AutocastGuard(bool enabled);  // keeps the current dtype
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState previous_;
};

// Applies op's policy to its inputs under the current autocast state (a no-op when
// autocast is off). Undefined tensors stay undefined. Used by every op in src/ops.
std::vector<Tensor> cast_inputs(OpId op, std::initializer_list<Tensor> inputs);
// The same for a one-input op, without the vector (reshape, relu, ... run per layer).
Tensor cast_input(OpId op, const Tensor& input);

// Runs the rest of a scope with autocast off when it is on (and does nothing otherwise): an
// op built from other ops enters one after applying its own row, so the ops inside run on
// the cast inputs as they would outside autocast instead of applying their own rows again
// (PyTorch excludes the autocast key below an autocast op the same way).
class AutocastSuspend {
 public:
  AutocastSuspend();
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;

 private:
  bool was_enabled_;
};

// The weight-cast cache: f32 leaves that require grad (parameters) are cast to the
// autocast dtype at most once per outermost region, and a parameter changed in place
// (optimizer step: version bump) is cast again.
struct CastCacheStats {
  int64_t casts = 0;     // parameter casts performed (cache misses)
  int64_t hits = 0;      // casts served from the cache
  int64_t prepared = 0;  // casts served from an offered copy (offer_cast)
  int64_t entries = 0;
};
CastCacheStats cast_cache_stats();
void reset_cast_cache_stats();
void clear_cast_cache();

// Prepared casts: `lowp` holds `param` (an f32 leaf) rounded to nearest even in a 16-bit
// dtype, made elsewhere, typically by the fused optimizer step that just wrote param
// (train::PrecisionStep does this for autocast presets). The weight-cast cache then uses
// lowp instead of casting param, for as long as param is unchanged (same storage and
// version); the offer outlives autocast regions. Thread-local, as the cache is. The caller
// keeps lowp's buffer unchanged while the offer is valid (an update that writes it bumps
// param's version first, which retires the offer).
void offer_cast(const Tensor& param, const Tensor& lowp);
void withdraw_offered_cast(const Tensor& param);  // releases the offered copy, if any
void clear_offered_casts();

// Where an op's output dtype differs from PyTorch 1.13's on CPU for the same inputs: one
// entry per (op, mode, inputs), with the reason. This list is the one source: `mixprec
// policy` prints it, docs/amp.md ("Differences from PyTorch") mirrors it, and
// tests/unit/amp/autocast_table_test.cpp runs every op against PyTorch's recorded dtypes
// (tests/golden/data/autocast_dtypes_torch113.json, from tests/golden/gen_autocast_table.py)
// and fails on a difference missing here or an entry that is no longer a difference.
// f16 autocast as a whole is not in it: PyTorch 1.13 cannot enter an f16 CPU region at all.
struct TorchDifference {
  OpId op;
  const char* mode;     // "bf16_autocast" or "no_autocast" (the golden's names)
  const char* inputs;   // "f32", "bf16", or "bf16_f32" (data input bf16, the others f32)
  const char* pytorch;  // PyTorch's output dtype, or "error" (it raises)
  const char* mixprec;  // ours
  const char* why;
};
std::span<const TorchDifference> differences_from_pytorch();

// The policy table as text: op, policy, the dtype an f32 input runs in under bf16 / f16,
// then the differences from PyTorch above.
std::string policy_table_string();

}  // namespace mixprec::amp
