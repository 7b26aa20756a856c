// backend/onednn/f16_emulation.cpp: the widen/narrow conversions and the dispatch log of
// the f16 emulation (see f16_emulation.h).
#include "backend/onednn/f16_emulation.h"

#include <algorithm>
#include <numeric>

#include "backend/onednn/reorder_util.h"
#include "core/convert.h"

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

Tensor widen(const Tensor& t) {
  if (!is_f16(t)) return t;
  return convert_keeping_layout(t, DType::f32);
}

Tensor narrow_to_f16(const Tensor& t) { return convert_keeping_layout(t, DType::f16); }

void note_impl(const std::string& impl) {
  if (dispatch_verbose()) t_last_impl = impl;
}

void log_f16_emulated(const char* op) {
  dispatch_log(std::string(op) + " f16",
               "f16 emulated on " + (t_last_impl.empty() ? std::string("?") : t_last_impl));
}

}  // namespace mixprec::backend::onednn
