// backend/onednn/memory_desc.h: mixprec Tensor <-> dnnl::memory::desc (dtype mapping, dims,
// strides). Tensors reach oneDNN as plain strided descs (dims = logical NCHW shape, strides =
// the tensor's strides), so contiguous and channels-last tensors both pass without a copy.
#pragma once
#include <dnnl.hpp>

#include "backend/onednn/engine.h"
#include "mixprec/core/tensor.h"

namespace mixprec::backend::onednn {

using dnnl_dt = dnnl::memory::data_type;
using dnnl_md = dnnl::memory::desc;

// undef for dtypes oneDNN cannot store (f64, i64).
dnnl_dt to_dnnl(DType d);

dnnl::memory::dims to_dims(const Shape& s);  // a 0-d shape becomes {1}
// dims = shape, strides = t.strides(), except that a tensor dense in `prefer` (or else in
// either plain format) gets that format's canonical strides: size-1 dims make a [N,1,H,W]
// tensor both contiguous and channels-last, and oneDNN matches layouts on exact strides,
// so an unnormalised stride on a size-1 dim would send it to a slower (ref) kernel.
dnnl_md md_of(const Tensor& t, MemoryFormat prefer = MemoryFormat::contiguous);
dnnl_md md_of(const Shape& shape, DType d, MemoryFormat format);
dnnl_md md_any(const Shape& shape, DType d);  // format_tag::any: oneDNN picks
// t's strides, replaced by the canonical contiguous (or else channels-last) strides when t is
// dense in that format: they differ only on size-1 dims, where oneDNN still compares them.
Shape canonical_strides(const Tensor& t);
// True when md is a plain strided layout equal to `format`'s strides for its dims.
bool md_is_format(const dnnl_md& md, MemoryFormat format);

// Input tensors are read-only, but dnnl::memory takes a void*.
inline void* handle_of(const Tensor& t) { return const_cast<void*>(t.data()); }

// A memory object with no buffer, re-pointed at each call (set_data_handle) so cached
// entries reuse it without allocating.
inline dnnl::memory unbound_memory(const dnnl_md& md) {
  return dnnl::memory(md, cpu_engine(), DNNL_MEMORY_NONE);
}

}  // namespace mixprec::backend::onednn
