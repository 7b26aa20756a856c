// strided.h: walking a strided tensor in logical (row-major) order. The slow, general
// path behind copy_, to_vector and the reference kernels; fast paths skip it when dense.
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec {

// Calls fn(logical_index, element_offset) for every element, where element_offset is the
// position in the storage (in elements) of the element at that logical index.
template <typename Fn>
void for_each_element(const Shape& shape, const Shape& strides, int64_t offset, Fn&& fn) {
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  const size_t d = shape.size();
  std::vector<int64_t> idx(d, 0);
  int64_t pos = offset;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, pos);
    for (size_t k = d; k-- > 0;) {  // odometer increment, last dim fastest
      if (++idx[k] < shape[k]) {
        pos += strides[k];
        break;
      }
      pos -= strides[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

}  // namespace mixprec
