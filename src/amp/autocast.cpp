// autocast.cpp: the thread-local autocast state, its RAII guard, input casting by policy
// and the weight-cast cache. The ops ask for their casts through ops/autocast_hook.h,
// which this file answers (amp is the layer above ops).
#include <unordered_map>

#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "mixprec/amp/amp.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/autocast_hook.h"
#include "ops/cast_grad.h"
#include "ops/dispatch.h"

namespace mixprec::amp {

namespace {

struct CacheEntry {
  std::weak_ptr<Storage> source_storage;  // detects a parameter whose buffer was swapped
  uint64_t version;
  Tensor cast;
};

struct ThreadState {
  AutocastState state;
  int depth = 0;  // nesting of AutocastGuards: the cache lives until depth returns to 0
  std::unordered_map<const TensorImpl*, CacheEntry> cache;
  std::unordered_map<const TensorImpl*, CacheEntry> offered;  // offer_cast: across regions
  CastCacheStats stats;
};

thread_local ThreadState t;

// f32 leaves that require grad: the parameters, which stay the same across the region.
bool cacheable(const Tensor& x) {
  return t.state.cache_enabled && x.is_leaf() && x.requires_grad() && x.dtype() == DType::f32;
}

// The entry of `map` for im when it still holds im's current values in dtype: same storage
// (not a new buffer at a reused address), same version (no in-place write since), else null.
const CacheEntry* valid_entry(const std::unordered_map<const TensorImpl*, CacheEntry>& map,
                              const TensorImpl& im, DType dtype) {
  auto it = map.find(&im);
  if (it == map.end() || it->second.version != im.storage->version() ||
      it->second.source_storage.lock() != im.storage || it->second.cast.dtype() != dtype)
    return nullptr;
  return &it->second;
}

Tensor cast_to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  if (!cacheable(x)) return cast(x, dtype);
  auto& im = TensorImpl::of(x);
  if (const CacheEntry* hit = valid_entry(t.cache, im, dtype)) {
    ++t.stats.hits;
    return hit->cast;
  }
  Tensor c;
  if (const CacheEntry* offered = valid_entry(t.offered, im, dtype)) {
    // Recorded as the cast would be, so the gradient still flows back to the parameter.
    c = offered->cast.detach();
    record_cast(x, c);
    ++t.stats.prepared;
  } else {
    // A parameter's 16-bit copy is weight memory, not an activation.
    MemoryCategoryGuard mg(MemoryCategory::parameters);
    c = cast(x, dtype);
    ++t.stats.casts;
  }
  t.cache[&im] = CacheEntry{im.storage, im.storage->version(), c};
  t.stats.entries = int64_t(t.cache.size());
  return c;
}

// Floating inputs other than f64 are eligible for casting (as in PyTorch).
bool eligible(const Tensor& x) {
  return x.defined() && is_floating(x.dtype()) && x.dtype() != DType::f64;
}

// A conv's data input (NCHW, no grad: the loader's batch) cast straight into channels-last,
// the layout the conv kernels run in (backend/onednn/conv.cpp): one oneDNN reorder
// f32 nchw -> bf16 nhwc (round to nearest even, as convert_elements) instead of a cast
// followed by a bf16 nchw -> nhwc reorder. Inputs that need grad take the plain cast so
// autograd records it.
bool casts_into_channels_last(OpId op, size_t index, const Tensor& x, DType dtype) {
  return op == OpId::conv2d && index == 0 && dtype == DType::bf16 && x.dtype() == DType::f32 &&
         x.dim() == 4 && x.is_contiguous() && !x.is_channels_last() && !x.requires_grad();
}

Tensor cast_channels_last(const Tensor& x, DType dtype) {
  using namespace backend;
  return ops_detail::dispatch(
      "reorder", x.dtype(),
      [&] { return onednn::reorder(x, dtype, MemoryFormat::channels_last); },
      [&] { return ref::reorder(x, dtype, MemoryFormat::channels_last); });
}

// Applies op's row (policy_for: the table or its override) to inputs, in place.
void cast_in_place(OpId op, std::span<Tensor> out) {
  if (!t.state.enabled) return;
  switch (policy_for(op)) {
    case CastPolicy::lower:
      for (size_t i = 0; i < out.size(); ++i) {
        Tensor& x = out[i];
        if (!eligible(x)) continue;
        x = casts_into_channels_last(op, i, x, t.state.dtype) ? cast_channels_last(x, t.state.dtype)
                                                              : cast_to(x, t.state.dtype);
      }
      break;
    case CastPolicy::fp32:
      for (auto& x : out)
        if (eligible(x)) x = cast(x, DType::f32);
      break;
    case CastPolicy::promote: {
      std::optional<DType> widest;
      for (auto& x : out)
        if (x.defined() && is_floating(x.dtype()))
          widest = widest ? promote_types(*widest, x.dtype()) : x.dtype();
      if (widest)
        for (auto& x : out)
          if (x.defined() && is_floating(x.dtype())) x = cast(x, *widest);
      break;
    }
    case CastPolicy::keep: break;
  }
}

bool exchange_enabled(bool enabled) {
  const bool was = t.state.enabled;
  t.state.enabled = enabled;
  return was;
}

// What src/ops asks (ops/autocast_hook.h): installed with the first AutocastGuard, before
// which autocast cannot be on.
constexpr ops_detail::AutocastHooks kHooks{&cast_in_place, &exchange_enabled};

}  // namespace

AutocastState autocast_state() { return t.state; }
bool is_autocast_enabled() { return t.state.enabled; }
DType autocast_dtype() { return t.state.dtype; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled, bool cache_enabled) : previous_(t.state) {
  static const bool installed = (ops_detail::install_autocast_hooks(&kHooks), true);
  (void)installed;
  if (enabled && !is_half(dtype))
    throw Error(Status::invalid_argument(std::string("autocast: dtype must be bf16 or f16, got ") +
                                         dtype_name(dtype)));
  t.state = AutocastState{enabled, dtype, cache_enabled};
  ++t.depth;
}

AutocastGuard::AutocastGuard(bool enabled) : AutocastGuard(t.state.dtype, enabled, t.state.cache_enabled) {}

AutocastGuard::~AutocastGuard() {
  t.state = previous_;
  if (--t.depth == 0) clear_cast_cache();
}

std::vector<Tensor> cast_inputs(OpId op, std::initializer_list<Tensor> inputs) {
  std::vector<Tensor> out(inputs);
  cast_in_place(op, out);
  return out;
}

Tensor cast_input(OpId op, const Tensor& input) {
  if (!t.state.enabled) return input;
  return cast_inputs(op, {input})[0];
}

// Only the enabled flag changes: the dtype, the cache and the nesting depth stay, so the
// weight-cast cache is not cleared when an op's internals finish.
AutocastSuspend::AutocastSuspend() : was_enabled_(t.state.enabled) { t.state.enabled = false; }
AutocastSuspend::~AutocastSuspend() { t.state.enabled = was_enabled_; }

CastCacheStats cast_cache_stats() { return t.stats; }
void reset_cast_cache_stats() { t.stats = {}; t.stats.entries = int64_t(t.cache.size()); }
void clear_cast_cache() {
  t.cache.clear();
  t.stats.entries = 0;
}

void offer_cast(const Tensor& param, const Tensor& lowp) {
  if (param.dtype() != DType::f32 || !param.is_leaf() || lowp.shape() != param.shape() ||
      (lowp.dtype() != DType::bf16 && lowp.dtype() != DType::f16))
    throw Error(Status::invalid_argument("offer_cast: expected an f32 leaf and a bf16/f16 copy of "
                                         "its shape, got " + param.str() + " and " + lowp.str()));
  auto& im = TensorImpl::of(param);
  t.offered[&im] = CacheEntry{im.storage, im.storage->version(), lowp};
}

void withdraw_offered_cast(const Tensor& param) { t.offered.erase(&TensorImpl::of(param)); }

void clear_offered_casts() { t.offered.clear(); }

}  // namespace mixprec::amp
