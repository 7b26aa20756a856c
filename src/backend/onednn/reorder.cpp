// backend/onednn/reorder.cpp: dtype and layout changes.
// - f32 <-> bf16 with a layout change: one oneDNN reorder (jit:uni, round to nearest even,
//   the same rounding as convert_elements) where oneDNN has bf16 kernels (AVX-512). Without
//   them (AVX2 CPUs) its reorder is a reference loop that rounds some values differently
//   (measured on AMD EPYC Zen3: a negative subnormal became +0, convert_elements gives -0),
//   even bf16 -> bf16, so there every bf16 reorder takes the byte-permute and
//   convert_elements route below, like f16.
// - Same layout, any dtype change: convert_elements (src/core/convert.h), the engine's one
//   conversion routine, so every cast in mixprec rounds identically.
// - f16 (and f64/int) with a layout change: the permutation runs as a u8 reorder over the
//   raw bytes (the element becomes a trailing dim of dtype_size bytes), then
//   convert_elements changes the dtype. oneDNN's own f16 reorder is never used: it is a
//   scalar loop ~500x slower than the F16C path (limits.md §1.5).
#include <cstring>

#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"
#include "backend/onednn/serial_scope.h"
#include "core/convert.h"

namespace mixprec::backend::onednn {
namespace {

struct ReorderEntry : CacheEntry {
  dnnl::reorder prim;
  dnnl::memory src, dst;
  std::unordered_map<int, dnnl::memory> args;
};

// The bytes of t (any dtype, any strides) as a u8 desc with a trailing element dim.
dnnl_md byte_md(const Shape& shape, const Shape& strides, DType d) {
  const int64_t es = static_cast<int64_t>(dtype_size(d));
  dnnl::memory::dims dims(shape.begin(), shape.end()), st;
  for (int64_t s : strides) st.push_back(s * es);
  dims.push_back(es);
  st.push_back(1);
  return dnnl_md(dims, dnnl_dt::u8, st);
}

bool is_dense_in(const Tensor& t, MemoryFormat f) {
  return f == MemoryFormat::channels_last ? t.is_channels_last() : t.is_contiguous();
}

// Reorders moving at most this many bytes (src + dst) run on the calling thread
// (serial_scope.h): in the seed CNN, the weight reorders and weight-gradient reorders of
// every layer but fc1. Measured 2026-11-22, seed CNN, 2 threads: with
// every reorder serial (16 MiB) the four big ones (fc1 weights and gradient, flatten and
// its backward; 2-8 MiB) took ~2 ms more per amp-bf16 step than on 2 threads in a quiet
// window (ONEDNN_VERBOSE 3.4 vs 1.3 ms), and interleaved runs with a busy process beside
// the step could not tell 1 MiB from 16 MiB (both beat all-parallel). So only small ones.
constexpr size_t kSerialReorderBytes = size_t(1) << 20;

bool onednn_converts(DType d) { return d == DType::f32 || d == DType::bf16; }

// One oneDNN reorder may change the dtype as well as the layout (see the banner).
bool onednn_reorders(DType from, DType to) {
  if (from == DType::f32 && to == DType::f32) return true;
  return onednn_converts(from) && onednn_converts(to) && has_native_bf16();
}

}  // namespace

void execute_reorder(const dnnl_md& src_md, const void* src, const dnnl_md& dst_md, void* dst) {
  // Serial for both creation and execution: jit:uni fixes its thread count at creation.
  SerialScope serial(src_md.get_size() + dst_md.get_size() <= kSerialReorderBytes);
  PrimKey key(PrimKind::reorder);
  key.add(src_md).add(dst_md);
  auto e = cached<ReorderEntry>(key, [&] {
    auto entry = std::make_shared<ReorderEntry>();
    try {
      dnnl::reorder::primitive_desc pd(cpu_engine(), src_md, cpu_engine(), dst_md);
      entry->prim = make_primitive<dnnl::reorder>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, "reorder");
    }
    entry->src = unbound_memory(src_md);
    entry->dst = unbound_memory(dst_md);
    entry->args = {{DNNL_ARG_FROM, entry->src}, {DNNL_ARG_TO, entry->dst}};
    dispatch_log("reorder", entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->src.set_data_handle(const_cast<void*>(src));
  e->dst.set_data_handle(dst);
  e->prim.execute(cpu_stream(), e->args);
}

Tensor in_format(const Tensor& t, MemoryFormat format) {
  if (is_dense_in(t, format)) return t;
  return onednn::reorder(t, t.dtype(), format);
}

Tensor reorder(const Tensor& src, DType dtype, MemoryFormat format) {
  if (format == MemoryFormat::channels_last && src.dim() != 4)
    throw Error(Status::invalid_argument("reorder: channels_last needs a 4-D tensor, got src " +
                                         describe(src)));
  Tensor dst = Tensor::empty(src.shape(), dtype, format);
  if (src.numel() == 0) return dst;
  const int64_t n = src.numel();
  if (is_dense_in(src, format)) {
    convert_elements(src.data(), src.dtype(), dst.data(), dtype, n);
    return dst;
  }
  if (onednn_reorders(src.dtype(), dtype)) {
    execute_reorder(md_of(src), src.data(), md_of(dst), dst.data());
    return dst;
  }
  // Permute bytes in one dtype, convert in the other (see the banner). Permute in the
  // narrower dtype when the source is dense, so the strided pass moves fewer bytes.
  auto permute = [](const Tensor& from, Tensor& to) {
    execute_reorder(byte_md(from.shape(), from.strides(), from.dtype()), from.data(),
                    byte_md(to.shape(), to.strides(), to.dtype()), to.data());
  };
  if (src.dtype() == dtype) {
    permute(src, dst);
  } else if (src.is_dense() && dtype_size(dtype) < dtype_size(src.dtype())) {
    Tensor tmp = Tensor::empty(src.shape(), dtype, src.suggest_memory_format());
    convert_elements(src.data(), src.dtype(), tmp.data(), dtype, n);
    permute(tmp, dst);
  } else {
    Tensor tmp = Tensor::empty(src.shape(), src.dtype(), format);
    permute(src, tmp);
    convert_elements(tmp.data(), src.dtype(), dst.data(), dtype, n);
  }
  return dst;
}

}  // namespace mixprec::backend::onednn
