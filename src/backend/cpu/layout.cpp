// backend/cpu/layout.cpp: see layout.h. Elements move bit for bit; only the scale rounds.
#include "backend/cpu/layout.h"

#include <algorithm>
#include <cstring>

#include "core/convert.h"

namespace mixprec::backend::cpu {

// p[0, n) *= scale, each element rounded once to dt: in blocks through f32 (f64 stays f64)
// with the library's vectorised conversions.
void scale_elements(void* p, DType dt, int64_t n, double scale) {
  if (dt == DType::f64) {
    double* x = static_cast<double*>(p);
    for (int64_t i = 0; i < n; ++i) x[i] *= scale;
    return;
  }
  constexpr int64_t kBlock = 4096;
  const size_t es = dtype_size(dt);
  char* base = static_cast<char*>(p);
  const float f = float(scale);
  for (int64_t off = 0; off < n; off += kBlock) {
    float buf[kBlock];
    const int64_t len = std::min(kBlock, n - off);
    convert_elements(base + off * int64_t(es), dt, buf, DType::f32, len);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) buf[i] *= f;
    convert_elements(buf, DType::f32, base + off * int64_t(es), dt, len);
  }
}

namespace {

// Below this many elements the OpenMP fork costs more than the copy.
constexpr int64_t kParallelMin = int64_t(1) << 15;

// dst[i0, i1, i2, i3] = src at sum(i_k * stride[k]) for dst of shape `shape` (contiguous);
// `stride` are src's strides reordered to dst's dims. Elements move bit for bit. When dst's
// last dim is strided in src but its third is not (a transpose of the last two dims, K^T),
// the (i2, i3) plane is copied in square tiles so that reads and writes both stay in cache.
template <typename T>
void permute_kernel(const T* src, T* dst, const Shape& shape, const std::array<int64_t, 4>& stride) {
  const int64_t n0 = shape[0], n1 = shape[1], n2 = shape[2], n3 = shape[3];
  const bool parallel = n0 * n1 * n2 * n3 > kParallelMin;
  if (stride[3] != 1 && stride[2] == 1) {
    constexpr int64_t kTile = 16;
#pragma omp parallel for collapse(2) if (parallel)
    for (int64_t i0 = 0; i0 < n0; ++i0)
      for (int64_t i1 = 0; i1 < n1; ++i1) {
        const T* s = src + i0 * stride[0] + i1 * stride[1];
        T* d = dst + (i0 * n1 + i1) * n2 * n3;
        for (int64_t a = 0; a < n2; a += kTile)
          for (int64_t b = 0; b < n3; b += kTile)
            for (int64_t i2 = a; i2 < std::min(a + kTile, n2); ++i2)
              for (int64_t i3 = b; i3 < std::min(b + kTile, n3); ++i3)
                d[i2 * n3 + i3] = s[i2 + i3 * stride[3]];
      }
    return;
  }
#pragma omp parallel for collapse(2) if (parallel)
  for (int64_t i0 = 0; i0 < n0; ++i0)
    for (int64_t i1 = 0; i1 < n1; ++i1)
      for (int64_t i2 = 0; i2 < n2; ++i2) {
        const T* s = src + i0 * stride[0] + i1 * stride[1] + i2 * stride[2];
        T* d = dst + ((i0 * n1 + i1) * n2 + i2) * n3;
        if (stride[3] == 1) {
          std::memcpy(d, s, size_t(n3) * sizeof(T));
        } else {
          for (int64_t i3 = 0; i3 < n3; ++i3) d[i3] = s[i3 * stride[3]];
        }
      }
}

// dst *= scale in place (scale_elements), in blocks on the OpenMP threads.
void scale_in_place(Tensor& dst, double scale) {
  const int64_t n = dst.numel();
  constexpr int64_t kBlock = 4096;
  const size_t es = dtype_size(dst.dtype());
  char* base = static_cast<char*>(dst.data());
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t off = 0; off < n; off += kBlock)
    scale_elements(base + off * int64_t(es), dst.dtype(), std::min(kBlock, n - off), scale);
}

}  // namespace

// scale * src.permute(perm) as a contiguous tensor; src is 4-D and floating, any strides.
Tensor permute_forward(const Tensor& src, const std::array<int, 4>& perm, double scale) {
  Shape shape(4);
  std::array<int64_t, 4> stride{};
  for (int k = 0; k < 4; ++k) {
    shape[size_t(k)] = src.size(perm[size_t(k)]);
    stride[size_t(k)] = src.strides()[size_t(perm[size_t(k)])];
  }
  Tensor dst = Tensor::empty(shape, src.dtype());
  if (dst.numel() == 0) return dst;
  switch (dtype_size(src.dtype())) {  // a copy moves bits: only the element size matters
    case 2:
      permute_kernel(static_cast<const uint16_t*>(src.data()), dst.data_ptr<uint16_t>(), shape, stride);
      break;
    case 4:
      permute_kernel(static_cast<const uint32_t*>(src.data()), dst.data_ptr<uint32_t>(), shape, stride);
      break;
    default:
      permute_kernel(static_cast<const uint64_t*>(src.data()), dst.data_ptr<uint64_t>(), shape, stride);
  }
  if (scale != 1.0) scale_in_place(dst, scale);
  return dst;
}

Tensor narrow_rows_backward(const Tensor& diff_dst, const Shape& full, int64_t start, int64_t row) {
  const Tensor g = diff_dst.is_contiguous() ? diff_dst : diff_dst.contiguous();
  Tensor out = Tensor::zeros(full, g.dtype());
  const size_t es = dtype_size(g.dtype());
  std::memcpy(static_cast<char*>(out.data()) + size_t(start * row) * es, g.data(),
              size_t(g.numel()) * es);
  return out;
}

Tensor cat_forward(const std::vector<Tensor>& src, int64_t d) {
  const Shape& first = src[0].shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= first[size_t(i)];
  for (size_t i = size_t(d) + 1; i < first.size(); ++i) inner *= first[i];
  Shape out_shape = first;
  out_shape[size_t(d)] = 0;
  for (const auto& x : src) out_shape[size_t(d)] += x.size(d);
  const DType dtype = src[0].dtype();
  const size_t es = dtype_size(dtype);
  Tensor out = Tensor::empty(out_shape, dtype);
  char* dst = static_cast<char*>(out.data());
  std::vector<size_t> chunk(src.size());
  for (size_t t = 0; t < src.size(); ++t) chunk[t] = size_t(src[t].size(d) * inner) * es;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t t = 0; t < src.size(); ++t) {
      std::memcpy(dst, static_cast<const char*>(src[t].data()) + size_t(o) * chunk[t], chunk[t]);
      dst += chunk[t];
    }
  return out;
}

std::vector<Tensor> cat_backward(const Tensor& diff_dst, const std::vector<Shape>& shapes,
                                 const std::vector<bool>& needs, int64_t d) {
  const Tensor g = diff_dst.contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= shapes[0][size_t(i)];
  for (size_t i = size_t(d) + 1; i < shapes[0].size(); ++i) inner *= shapes[0][i];
  const size_t es = dtype_size(g.dtype());
  std::vector<size_t> chunk(shapes.size());
  for (size_t t = 0; t < shapes.size(); ++t) chunk[t] = size_t(shapes[t][size_t(d)] * inner) * es;
  const char* s = static_cast<const char*>(g.data());
  std::vector<Tensor> grads(shapes.size());
  for (size_t t = 0; t < shapes.size(); ++t)
    if (needs[t]) grads[t] = Tensor::empty(shapes[t], g.dtype());
  size_t row = 0;
  for (size_t c : chunk) row += c;
  for (int64_t o = 0; o < outer; ++o) {
    const char* p = s + size_t(o) * row;
    for (size_t t = 0; t < shapes.size(); ++t) {
      if (needs[t])
        std::memcpy(static_cast<char*>(grads[t].data()) + size_t(o) * chunk[t], p, chunk[t]);
      p += chunk[t];
    }
  }
  return grads;
}

Tensor convert_dense(const Tensor& in, DType dtype) {
  // Same strides as the input: a dense buffer converts in one linear pass.
  Tensor out = Tensor::empty(in.shape(), dtype, in.suggest_memory_format());
  convert_elements(in.data(), in.dtype(), out.data(), dtype, in.numel());
  return out;
}

}  // namespace mixprec::backend::cpu
