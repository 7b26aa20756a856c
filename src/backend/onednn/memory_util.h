// backend/onednn/memory_util.h: mixprec Tensor <-> dnnl::memory::desc, dtype mapping, error
// translation and the MIXPREC_VERBOSE=dispatch log.
// Tensors reach oneDNN as plain strided descs (dims = logical NCHW shape, strides = the
// tensor's strides), so contiguous and channels-last tensors both pass without a copy.
#pragma once
#include <dnnl.hpp>

#include <string>

#include "backend/dispatch_log.h"
#include "backend/onednn/engine.h"
#include "mixprec/status.h"
#include "mixprec/tensor.h"

namespace mixprec::backend::onednn {

using dnnl_dt = dnnl::memory::data_type;
using dnnl_md = dnnl::memory::desc;

// undef for dtypes oneDNN cannot store (f64, i64).
dnnl_dt to_dnnl(DType d);

// oneDNN 2.6.3 computes in f32 and bf16 only (limits.md §1.3: no f16 compute primitive on
// CPU). Anything else throws Error(unimplemented) naming the op, so the ops layer falls
// back (f16 emulation, f64 ref).
void require_compute_dtype(const char* op, DType d);

dnnl::memory::dims to_dims(const Shape& s);  // a 0-d shape becomes {1}
// dims = shape, strides = t.strides(), except that a tensor dense in `prefer` (or else in
// either plain format) gets that format's canonical strides: size-1 dims make a [N,1,H,W]
// tensor both contiguous and channels-last, and oneDNN matches layouts on exact strides,
// so an unnormalised stride on a size-1 dim would send it to a slower (ref) kernel.
dnnl_md md_of(const Tensor& t, MemoryFormat prefer = MemoryFormat::contiguous);
dnnl_md md_of(const Shape& shape, DType d, MemoryFormat format);
dnnl_md md_any(const Shape& shape, DType d);  // format_tag::any: oneDNN picks
Shape strides_of(const Shape& shape, MemoryFormat format);
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

// "bf16 [256, 32, 16, 16] nhwc" / "f32 [256, 10]"
std::string describe(const Tensor& t);
std::string describe(const Shape& shape, DType d);

// Translates a dnnl::error thrown while creating a primitive: dnnl_unimplemented becomes
// Error(unimplemented) and anything else Error(internal); `what` names op, dtypes, shapes.
[[noreturn]] void rethrow_dnnl(const dnnl::error& e, const std::string& what);

// dispatch_verbose() (MIXPREC_VERBOSE=dispatch) is backend/dispatch_log.h's, shared with
// the ops' route. Prints "mixprec: dispatch <kind> -> <impl> (oneDNN)" to stderr once per distinct line
// when dispatch_verbose(); kind names the kernel and dtype, e.g. "conv2d_forward f32".
// Reference kernels (impl "ref:*") are flagged as slow.
// `detail` (shapes, layouts) is printed only for reference kernels, to find the culprit.
void dispatch_log(const std::string& kind, const std::string& impl_name,
                  const std::string& detail = "");

}  // namespace mixprec::backend::onednn
