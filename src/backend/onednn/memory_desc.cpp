// backend/onednn/memory_desc.cpp: Tensor <-> memory desc mapping (memory_desc.h). A
// format's strides are tensor.h's strides_for, the ones Tensor::empty lays out.
#include "backend/onednn/memory_desc.h"

#include <algorithm>

namespace mixprec::backend::onednn {

dnnl_dt to_dnnl(DType d) {
  switch (d) {
    case DType::f32: return dnnl_dt::f32;
    case DType::bf16: return dnnl_dt::bf16;
    case DType::f16: return dnnl_dt::f16;
    case DType::i32: return dnnl_dt::s32;
    case DType::u8: return dnnl_dt::u8;
    case DType::f64:
    case DType::i64: return dnnl_dt::undef;
  }
  return dnnl_dt::undef;
}

dnnl::memory::dims to_dims(const Shape& s) {
  if (s.empty()) return {1};
  return dnnl::memory::dims(s.begin(), s.end());
}

Shape canonical_strides(const Tensor& t) {
  if (t.is_contiguous()) return contiguous_strides(t.shape());
  if (t.dim() == 4 && t.is_channels_last()) return channels_last_strides(t.shape());
  return t.strides();
}

dnnl_md md_of(const Tensor& t, MemoryFormat prefer) {
  if (t.dim() == 0) return dnnl_md({1}, to_dnnl(t.dtype()), dnnl::memory::dims{1});
  const bool cl = t.dim() == 4 && t.is_channels_last();
  if (prefer == MemoryFormat::channels_last && cl) return md_of(t.shape(), t.dtype(), prefer);
  const Shape st = canonical_strides(t);
  return dnnl_md(to_dims(t.shape()), to_dnnl(t.dtype()), dnnl::memory::dims(st.begin(), st.end()));
}

dnnl_md md_of(const Shape& shape, DType d, MemoryFormat format) {
  if (shape.empty()) return dnnl_md({1}, to_dnnl(d), dnnl::memory::dims{1});
  const Shape st = strides_for(shape, format);
  return dnnl_md(to_dims(shape), to_dnnl(d), dnnl::memory::dims(st.begin(), st.end()));
}

dnnl_md md_any(const Shape& shape, DType d) {
  return dnnl_md(to_dims(shape), to_dnnl(d), dnnl::memory::format_tag::any);
}

bool md_is_format(const dnnl_md& md, MemoryFormat format) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0) return false;
  const Shape dims(d.dims, d.dims + d.ndims);
  if (format == MemoryFormat::channels_last && dims.size() != 4) return false;  // only 4-D has it
  const Shape want = strides_for(dims, format);
  for (int i = 0; i < d.ndims; ++i)
    if (dims[i] != 1 && d.format_desc.blocking.strides[i] != want[i]) return false;
  return true;
}

}  // namespace mixprec::backend::onednn
