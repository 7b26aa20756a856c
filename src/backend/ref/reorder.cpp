// backend/ref/reorder.cpp: copies between dtypes and memory formats, and src * alpha + beta.
// reorder converts element by element through convert_elements (the one place casts
// happen, so rounding is nearest even exactly as everywhere else) and does not pass
// through double, so i64 -> i64 stays exact beyond 2^53.
#include <cstdint>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"
#include "core/convert.h"
#include "core/storage.h"

namespace mixprec::backend::ref {

Tensor reorder(const Tensor& src, DType dtype, MemoryFormat format) {
  const char* op = "reorder";
  if (!src.defined()) fail("reorder: src is undefined");
  const Shape& shape = src.shape();
  if (format == MemoryFormat::channels_last && shape.size() != 4)
    fail(std::string(op) + ": channels_last needs a 4-D src, got " + shape_str(shape));
  Tensor dst = Tensor::empty(shape, dtype, format);
  const int64_t n = shape_numel(shape);
  if (n == 0) return dst;
  const auto* src_base = static_cast<const uint8_t*>(src.storage()->data());
  auto* dst_base = static_cast<uint8_t*>(dst.storage()->data());
  const size_t src_size = dtype_size(src.dtype()), dst_size = dtype_size(dtype);
  const Shape& src_strides = src.strides();
  const Shape& dst_strides = dst.strides();
  const auto rank = static_cast<int64_t>(shape.size());
  // One odometer, two storage positions: the logical index is the same on both sides.
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t src_pos = src.storage_offset(), dst_pos = dst.storage_offset();
  for (int64_t i = 0; i < n; ++i) {
    convert_elements(src_base + src_pos * src_size, src.dtype(), dst_base + dst_pos * dst_size,
                     dtype, 1);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        src_pos += src_strides[d];
        dst_pos += dst_strides[d];
        break;
      }
      src_pos -= (shape[d] - 1) * src_strides[d];
      dst_pos -= (shape[d] - 1) * dst_strides[d];
      idx[d] = 0;
    }
  }
  return dst;
}

Tensor linear_scale(const Tensor& src, double alpha, double beta) {
  check_floating("linear_scale", "src", src);
  std::vector<double> v = read_f64(src);
  for (double& x : v) x = x * alpha + beta;  // one rounding, at the store
  return make_tensor(v, src.shape(), src.dtype());
}

}  // namespace mixprec::backend::ref
