// backend/onednn/memory_util.cpp: Tensor <-> memory desc mapping and dispatch logging.
#include "backend/onednn/memory_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

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

void require_compute_dtype(const char* op, DType d) {
  if (d == DType::f32 || d == DType::bf16) return;
  std::string why = d == DType::f16
                        ? "oneDNN 2.6.3 has no f16 compute kernel on CPU"
                        : std::string("oneDNN has no ") + dtype_name(d) + " kernels";
  if (dispatch_verbose()) dispatch_log(std::string(op) + " " + dtype_name(d), "unimplemented");
  throw Error(Status::unimplemented(std::string(op) + ": dtype " + dtype_name(d) +
                                    " unsupported by the onednn backend (" + why +
                                    "; expected f32 or bf16)"));
}

dnnl::memory::dims to_dims(const Shape& s) {
  if (s.empty()) return {1};
  return dnnl::memory::dims(s.begin(), s.end());
}

Shape strides_of(const Shape& shape, MemoryFormat format) {
  return format == MemoryFormat::channels_last ? channels_last_strides(shape)
                                                : contiguous_strides(shape);
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
  const Shape st = strides_of(shape, format);
  return dnnl_md(to_dims(shape), to_dnnl(d), dnnl::memory::dims(st.begin(), st.end()));
}

dnnl_md md_any(const Shape& shape, DType d) {
  return dnnl_md(to_dims(shape), to_dnnl(d), dnnl::memory::format_tag::any);
}

bool md_is_format(const dnnl_md& md, MemoryFormat format) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0) return false;
  const Shape dims(d.dims, d.dims + d.ndims);
  const Shape want = strides_of(dims, format);
  for (int i = 0; i < d.ndims; ++i)
    if (dims[i] != 1 && d.format_desc.blocking.strides[i] != want[i]) return false;
  return true;
}

std::string describe(const Shape& shape, DType d) {
  return std::string(dtype_name(d)) + " " + shape_str(shape);
}

std::string describe(const Tensor& t) {
  std::string s = describe(t.shape(), t.dtype());
  if (t.dim() == 4) s += t.is_contiguous() ? " nchw" : t.is_channels_last() ? " nhwc" : " strided";
  return s;
}

[[noreturn]] void rethrow_dnnl(const dnnl::error& e, const std::string& what) {
  if (e.status == dnnl_unimplemented) {
    if (dispatch_verbose()) dispatch_log(what, "unimplemented");
    throw Error(Status::unimplemented(what + ": oneDNN has no implementation (" + e.what() + ")"));
  }
  // oneDNN cannot express some degenerate problems (e.g. a reduction to a 0-d result):
  // the reference backend can, so let the ops layer fall back rather than fail.
  if (e.status == dnnl_invalid_arguments) {
    if (dispatch_verbose()) dispatch_log(what, "rejected by oneDNN");
    throw Error(Status::unimplemented(what + ": oneDNN rejected the problem (" + e.what() + ")"));
  }
  throw Error(Status::internal(what + ": oneDNN error " + std::to_string(int(e.status)) + " (" +
                               e.what() + ")"));
}

void dispatch_log(const std::string& kind, const std::string& impl_name,
                  const std::string& detail) {
  if (!dispatch_verbose()) return;
  std::string line = kind + " -> " + impl_name + " (oneDNN)";
  // oneDNN's reference kernels run scalar loops: f32 conv1 backward-data as ref:any took
  // 7-12 s at batch 256 (limits.md §2), so make them stand out.
  if (impl_name.rfind("ref:", 0) == 0)
    line += " [slow reference kernel" + (detail.empty() ? "" : ": " + detail) + "]";
  dispatch_log_line(line);
}

}  // namespace mixprec::backend::onednn
