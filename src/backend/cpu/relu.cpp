// backend/cpu/relu.cpp: NaN-propagating ReLU on the raw bits (see relu.h). The loops are
// plain integer selects that GCC vectorises; they are memory-bound, so OpenMP splits large
// tensors (static schedule: every element is written once, results do not depend on the
// thread count).
#include "backend/cpu/relu.h"
#include "core/cpu_features.h"

#include <algorithm>
#include <cstdint>

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

// Chunks of kChunk elements are the unit of work: each thread takes whole chunks (static
// schedule), and each chunk runs a loop compiled for AVX-512 (BW for 16-bit lanes) when
// the CPU has it, else for the baseline ISA (4-8x narrower for 16-bit data).
constexpr int64_t kChunk = 1 << 14;

// NaN: exponent all ones with a non-zero mantissa. Sign is the sign bit of the width.
template <typename Bits, Bits Sign, Bits Inf>
MIXPREC_ALWAYS_INLINE void forward_range(const Bits* x, Bits* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const Bits v = x[i];
    const bool nan = Bits(v & Bits(~Sign)) > Inf;
    const bool positive = !(v & Sign) && v != 0;
    y[i] = (positive || nan) ? v : Bits(0);
  }
}

template <typename Bits, Bits Sign, Bits Inf>
MIXPREC_ALWAYS_INLINE void backward_range(const Bits* g, const Bits* d, Bits* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const Bits v = d[i];
    const bool nan = Bits(v & Bits(~Sign)) > Inf;
    const bool positive = !(v & Sign) && v != 0;  // relu's output is never negative
    out[i] = (positive || nan) ? g[i] : Bits(0);
  }
}

template <typename Bits, Bits Sign, Bits Inf>
__attribute__((target("avx512f,avx512bw"))) void forward_avx512(const Bits* x, Bits* y, int64_t n) {
  forward_range<Bits, Sign, Inf>(x, y, n);
}
template <typename Bits, Bits Sign, Bits Inf>
void forward_baseline(const Bits* x, Bits* y, int64_t n) {
  forward_range<Bits, Sign, Inf>(x, y, n);
}
template <typename Bits, Bits Sign, Bits Inf>
__attribute__((target("avx512f,avx512bw"))) void backward_avx512(const Bits* g, const Bits* d,
                                                                  Bits* out, int64_t n) {
  backward_range<Bits, Sign, Inf>(g, d, out, n);
}
template <typename Bits, Bits Sign, Bits Inf>
void backward_baseline(const Bits* g, const Bits* d, Bits* out, int64_t n) {
  backward_range<Bits, Sign, Inf>(g, d, out, n);
}

template <typename Bits, Bits Sign, Bits Inf>
void forward_bits(const Bits* x, Bits* y, int64_t n) {
  auto* kernel = cpu_features().avx512bw ? forward_avx512<Bits, Sign, Inf> : forward_baseline<Bits, Sign, Inf>;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c)
    kernel(x + c * kChunk, y + c * kChunk, std::min(kChunk, n - c * kChunk));
}

template <typename Bits, Bits Sign, Bits Inf>
void backward_bits(const Bits* g, const Bits* d, Bits* out, int64_t n) {
  auto* kernel = cpu_features().avx512bw ? backward_avx512<Bits, Sign, Inf> : backward_baseline<Bits, Sign, Inf>;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c)
    kernel(g + c * kChunk, d + c * kChunk, out + c * kChunk, std::min(kChunk, n - c * kChunk));
}

[[noreturn]] void bad(const char* op, const std::string& what) {
  throw Error(Status::invalid_argument(std::string(op) + ": " + what));
}

}  // namespace

bool relu_supported(const Tensor& t) {
  const DType d = t.dtype();
  return (d == DType::f32 || d == DType::bf16 || d == DType::f16) && t.is_dense();
}

Tensor relu_forward(const Tensor& src) {
  if (!relu_supported(src)) bad("relu_forward", "needs a dense f32/bf16/f16 tensor, got " + src.str());
  Tensor dst = Tensor::empty_like(src);
  const int64_t n = src.numel();
  switch (src.dtype()) {
    case DType::f32:
      forward_bits<uint32_t, 0x80000000u, 0x7F800000u>(src.data_ptr<uint32_t>(), dst.data_ptr<uint32_t>(), n);
      break;
    case DType::bf16:
      forward_bits<uint16_t, 0x8000u, 0x7F80u>(static_cast<const uint16_t*>(src.data()),
                                               static_cast<uint16_t*>(dst.data()), n);
      break;
    default:
      forward_bits<uint16_t, 0x8000u, 0x7C00u>(static_cast<const uint16_t*>(src.data()),
                                               static_cast<uint16_t*>(dst.data()), n);
  }
  return dst;
}

Tensor relu_backward(const Tensor& diff_dst, const Tensor& dst) {
  if (!relu_supported(dst)) bad("relu_backward", "needs a dense f32/bf16/f16 dst, got " + dst.str());
  if (diff_dst.shape() != dst.shape() || diff_dst.dtype() != dst.dtype())
    bad("relu_backward", "diff_dst " + diff_dst.str() + " must match dst " + dst.str());
  // Walk both in dst's element order (a copy only when diff_dst is laid out otherwise).
  const Tensor g = diff_dst.to_memory_format(dst.suggest_memory_format());
  Tensor out = Tensor::empty_like(dst);
  const int64_t n = dst.numel();
  switch (dst.dtype()) {
    case DType::f32:
      backward_bits<uint32_t, 0x80000000u, 0x7F800000u>(g.data_ptr<uint32_t>(), dst.data_ptr<uint32_t>(),
                                                        out.data_ptr<uint32_t>(), n);
      break;
    case DType::bf16:
      backward_bits<uint16_t, 0x8000u, 0x7F80u>(static_cast<const uint16_t*>(g.data()),
                                                static_cast<const uint16_t*>(dst.data()),
                                                static_cast<uint16_t*>(out.data()), n);
      break;
    default:
      backward_bits<uint16_t, 0x8000u, 0x7C00u>(static_cast<const uint16_t*>(g.data()),
                                                static_cast<const uint16_t*>(dst.data()),
                                                static_cast<uint16_t*>(out.data()), n);
  }
  return out;
}

}  // namespace mixprec::backend::cpu
