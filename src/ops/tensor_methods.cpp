// ops/tensor_methods.cpp: the Tensor conversions that are ops (to, contiguous,
// to_memory_format, reshape). Tensor is declared in core (mixprec/core/tensor.h), but these
// record a graph through ops/layout.cpp, and ops come after core in the layers
// (docs/design.md); core/tensor.cpp keeps the factories, metadata and data access.
// Tensor::backward is in tensor_backward.cpp: the parsers' object list
// (cmake/fuzz_sources.cmake) needs these conversions and not the ops backward calls.
#include "mixprec/ops/ops.h"
#include "mixprec/core/tensor.h"

namespace mixprec {

Tensor Tensor::to(DType dtype) const { return dtype == this->dtype() ? *this : cast(*this, dtype); }
Tensor Tensor::contiguous() const {
  return is_contiguous() ? *this : mixprec::to_memory_format(*this, MemoryFormat::contiguous);
}
Tensor Tensor::to_memory_format(MemoryFormat format) const {
  const bool already = format == MemoryFormat::contiguous ? is_contiguous()
                                                          : (dim() != 4 || is_channels_last());
  return already ? *this : mixprec::to_memory_format(*this, format);
}
Tensor Tensor::reshape(const Shape& shape) const { return mixprec::reshape(*this, shape); }

}  // namespace mixprec
