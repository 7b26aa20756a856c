// backend/onednn/reorder_util.h: cached oneDNN reorders between memory descs, and the
// Tensor-level layout helpers the compute kernels use.
#pragma once
#include "backend/onednn/memory_desc.h"

namespace mixprec::backend::onednn {

// Copies src (described by src_md) into dst (dst_md) with a cached oneDNN reorder.
// Callers never pass f16 with a dtype change: oneDNN's f32<->f16 reorder is a scalar
// loop ~500x slower than the intrinsics in convert_elements (limits.md §1.5).
void execute_reorder(const dnnl_md& src_md, const void* src, const dnnl_md& dst_md, void* dst);

// t itself when it already has `format` (dense), else a copy in `format`, same dtype.
Tensor in_format(const Tensor& t, MemoryFormat format);

}  // namespace mixprec::backend::onednn
