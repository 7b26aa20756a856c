// strided_copy.h: copying the elements of one strided layout into another of the same
// dtype: Tensor::copy_'s path when the layouts differ (a transpose or permute made dense, a
// view written through, Python's strided views made dense before a kernel). Bits are moved,
// never converted.
#pragma once
#include <cstddef>
#include <cstdint>

#include "mixprec/core/tensor.h"

namespace mixprec {

// dst[i] = src[i] for every logical index i of `shape`; src and dst are the first elements
// (storage offset applied), strides in elements, `element_size` bytes an element (1, 2, 4
// or 8). The layouts may be any strides, including broadcast (0) strides in src; dst must not
// overlap src. Dims are merged where both layouts allow, rows are copied whole where both
// are dense along the innermost dim, and a dim that is innermost in one layout but not in the
// other is copied as a transpose in cache-sized tiles (a copy walking dst in order would read
// src a stride apart per element: ~50x slower for a 1024 x 1024 float transpose).
void strided_copy(const void* src, const Shape& src_strides, void* dst, const Shape& dst_strides, const Shape& shape,
                  size_t element_size);

}  // namespace mixprec
