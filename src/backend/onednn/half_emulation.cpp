// backend/onednn/half_emulation.cpp: the widen/narrow conversions and the dispatch log of
// the 16-bit emulation (see half_emulation.h).
#include "backend/onednn/half_emulation.h"

#include <algorithm>
#include <numeric>

#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/engine.h"
#include "backend/onednn/reorder_util.h"
#include "core/convert.h"
#include "core/cpu_features.h"

namespace mixprec::backend::onednn {
namespace {

thread_local std::string t_last_impl;

// True when t's elements fill exactly numel consecutive slots from data() on (any order of
// positive strides): then the raw range converts as one buffer and the strides carry over.
bool is_permuted_dense(const Tensor& t) {
  const int64_t r = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(r));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t d = 0; d < r; ++d)
    if (t.strides()[d] < 0) return false;
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return t.strides()[a] < t.strides()[b]; });
  int64_t expect = 1;
  for (int64_t d : order) {
    if (t.size(d) == 1) continue;
    if (t.strides()[d] != expect) return false;
    expect *= t.size(d);
  }
  return true;
}

Tensor convert_keeping_layout(const Tensor& t, DType to) {
  if (!t.defined() || t.dtype() == to) return t;
  const int64_t n = t.numel();
  if (t.is_dense()) {
    Tensor out = Tensor::empty(t.shape(), to, t.suggest_memory_format());
    if (n > 0) convert_elements(t.data(), t.dtype(), out.data(), to, n);
    return out;
  }
  if (n > 0 && is_permuted_dense(t)) {
    Tensor flat = Tensor::empty({n}, to);
    convert_elements(t.data(), t.dtype(), flat.data(), to, n);
    return flat.as_strided(t.shape(), t.strides(), 0);
  }
  return reorder(t, to, MemoryFormat::contiguous);
}

}  // namespace

bool has_native_bf16() {
  static const bool yes = [] {
    const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());  // a superset's bits
    return (isa & core) == core && cpu_features().avx512bw;
  }();
  return yes;
}

Tensor widen(const Tensor& t) {
  if (!is_emulated(t)) return t;
  MemoryCategoryGuard workspace(MemoryCategory::workspace);
  return convert_keeping_layout(t, DType::f32);
}

Tensor narrow_to(const Tensor& t, DType dtype) { return convert_keeping_layout(t, dtype); }

void note_impl(const std::string& impl) {
  if (dispatch_verbose()) t_last_impl = impl;
}

void log_emulated(const char* op, DType dtype) {
  const std::string name = dtype_name(dtype);
  dispatch_log(std::string(op) + " " + name,
               name + " emulated on " + (t_last_impl.empty() ? std::string("?") : t_last_impl));
}

}  // namespace mixprec::backend::onednn
