// backend/cpu/embedding.cpp: see embedding.h.
#include "backend/cpu/embedding.h"

#include <cstring>

#include "core/convert.h"

namespace mixprec::backend::cpu {

Tensor embedding_forward(const Tensor& weight_in, const std::vector<int64_t>& idx, const Shape& shape) {
  const Tensor weight = weight_in.is_contiguous() ? weight_in : weight_in.contiguous();
  const int64_t dim = weight.size(1);
  const size_t row_bytes = size_t(dim) * dtype_size(weight.dtype());
  Tensor out = Tensor::empty(shape, weight.dtype());
  const auto* w = static_cast<const uint8_t*>(weight.data());
  auto* o = static_cast<uint8_t*>(out.data());
#pragma omp parallel for schedule(static) if (idx.size() * row_bytes > (1u << 16))
  for (int64_t i = 0; i < int64_t(idx.size()); ++i)
    std::memcpy(o + size_t(i) * row_bytes, w + size_t(idx[size_t(i)]) * row_bytes, row_bytes);
  return out;
}

Tensor embedding_backward(const Tensor& diff_dst_in, const std::vector<int64_t>& idx, int64_t rows,
                          DType dtype) {
  const Tensor diff_dst = diff_dst_in.is_contiguous() ? diff_dst_in : diff_dst_in.contiguous();
  const int64_t dim = idx.empty() ? 0 : diff_dst.numel() / int64_t(idx.size());
  // The accumulator: f32 for every 16-bit and f32 gradient, f64 for f64 (gradchecks).
  const DType acc_dtype = dtype == DType::f64 || diff_dst.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor acc = Tensor::zeros({rows, dim}, acc_dtype);
  // One row of diff_dst widened at a time (exactly: bf16/f16 -> f32 is exact), then added in
  // the order of idx, serially: the sums do not depend on the thread count.
  Tensor row = Tensor::empty({dim}, acc_dtype);
  const auto* g = static_cast<const uint8_t*>(diff_dst.data());
  const size_t g_row_bytes = size_t(dim) * dtype_size(diff_dst.dtype());
  for (size_t i = 0; i < idx.size(); ++i) {
    convert_elements(g + i * g_row_bytes, diff_dst.dtype(), row.data(), acc_dtype, dim);
    if (acc_dtype == DType::f64) {
      double* a = acc.data_ptr<double>() + idx[i] * dim;
      const double* r = row.data_ptr<double>();
      for (int64_t d = 0; d < dim; ++d) a[d] += r[d];
    } else {
      float* a = acc.data_ptr<float>() + idx[i] * dim;
      const float* r = row.data_ptr<float>();
      for (int64_t d = 0; d < dim; ++d) a[d] += r[d];
    }
  }
  return acc_dtype == dtype ? acc : acc.to(dtype);  // one rounding
}

}  // namespace mixprec::backend::cpu
