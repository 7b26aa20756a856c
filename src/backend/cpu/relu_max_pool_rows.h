// backend/cpu/relu_max_pool_rows.h: what the paths of the fused relu + max-pool kernel share
// (relu_max_pool.cpp: entry points and the scalar path; relu_max_pool_avx512.cpp and
// relu_max_pool_avx2.cpp: the NHWC vector paths): the argmax's 4-bit packing, the walks over
// dst rows (forward) and input rows (backward) with their threading, and the vector paths'
// entry points. relu_max_pool.cpp's header comment describes the paths and the argmax.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/relu_max_pool.h"
#include "core/cpu_features.h"
#include "mixprec/core/half.h"

namespace mixprec::backend::cpu::relu_pool {

inline constexpr int64_t kParallelMin = 1 << 15;

inline bool has_avx512() { return cpu_features().avx512bw && cpu_features().avx512vl; }
inline bool has_avx2() { return cpu_features().avx2 && cpu_features().f16c; }

inline float load_scalar(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return detail::bfloat16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return detail::half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

// Copies element i of src to element o of dst, raw bits (the maximum is one of the inputs).
inline void copy_raw(const void* src, int64_t i, void* dst, int64_t o, size_t es) {
  std::memcpy(static_cast<char*>(dst) + o * es, static_cast<const char*>(src) + i * es, es);
}

// ---- 4-bit argmax: bytes <-> nibbles ------------------------------------------------
// Byte codes are 0..k*k-1 (< 15) or 255; the low nibble keeps positions and maps 255 to 15.

// n byte codes (any n; src[n] is scratch) -> ceil(n/2) packed bytes, the odd tail padded
// with "none".
void pack_nibbles(uint8_t* src, int64_t n, uint8_t* dst);

inline uint8_t nibble(const uint8_t* packed, int64_t i) {
  return static_cast<uint8_t>((packed[i / 2] >> (4 * (i % 2))) & 0xF);
}

// Elements [start, start + n) of a packed argmax -> n byte codes.
void unpack_nibbles(const uint8_t* packed, int64_t start, int64_t n, uint8_t* dst);

// A thread's byte-code buffer for one or two dst rows; it only grows, so a steady-state
// training step allocates nothing here.
uint8_t* scratch(size_t bytes);

// Calls row_fn(r, codes) for every dst row r (`len` elements, adjacent in memory), which
// writes the row's byte codes to codes[0..len); stores them into arg as bytes or nibbles.
// Threads take pairs of rows: a pair starts at element 2q*len, even, so a packed byte is
// never written by two threads.
template <typename RowFn>
void for_each_dst_row(int64_t rows, int64_t len, bool packed, uint8_t* arg, bool parallel,
                      const RowFn& row_fn) {
  const int64_t pairs = (rows + 1) / 2;
#pragma omp parallel if (parallel)
  {
    uint8_t* buf = packed ? scratch(size_t(2 * len + 1)) : nullptr;  // +1: pack_nibbles' pad
#pragma omp for schedule(static)
    for (int64_t q = 0; q < pairs; ++q) {
      const int64_t r0 = 2 * q, r1 = std::min(r0 + 2, rows);
      for (int64_t r = r0; r < r1; ++r) row_fn(r, packed ? buf + (r - r0) * len : arg + r * len);
      if (packed) pack_nibbles(buf, (r1 - r0) * len, arg + q * len);
    }
  }
}

// dd: [N, OH, OW, C]; diff_src: [N, H, W, C]. A packed dst row is unpacked once and reused
// by the k input rows it covers (static schedule: a thread's input rows are consecutive).
// row(dd_row, codes, out, h % k) writes one input row (the ISA's backward_nhwc_row).
template <typename T, typename RowFn>
void backward_nhwc_rows(const T* dd, const uint8_t* arg, bool packed, T* ds, int64_t N, int64_t C, int64_t H,
                        int64_t W, int64_t k, const RowFn& row) {
  const int64_t OH = H / k, rows = N * H, len = (W / k) * C;
#pragma omp parallel if (rows * W * C > kParallelMin)
  {
    uint8_t* buf = packed ? scratch(size_t(len)) : nullptr;
    int64_t unpacked = -1;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = r / H, h = r % H, oh = h / k, drow = n * OH + oh;
      T* out = ds + r * W * C;
      if (oh >= OH) {  // the row floor mode dropped
        std::memset(out, 0, sizeof(T) * W * C);
        continue;
      }
      if (packed && unpacked != drow) {
        unpack_nibbles(arg, drow * len, len, buf);
        unpacked = drow;
      }
      const uint8_t* codes = packed ? buf : arg + drow * len;
      row(dd + drow * len, codes, out, h % k);
    }
  }
}

// The typed views the vector paths take: fn(tag, x, dst) with tag a
// std::integral_constant<DType, dt> and the buffers as float (f32) or uint16_t (bf16, f16).
template <typename Fn>
void with_dtype(DType dt, const void* x, void* dst, const Fn& fn) {
  if (dt == DType::f32)
    fn(std::integral_constant<DType, DType::f32>{}, static_cast<const float*>(x), static_cast<float*>(dst));
  else if (dt == DType::bf16)
    fn(std::integral_constant<DType, DType::bf16>{}, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(dst));
  else
    fn(std::integral_constant<DType, DType::f16>{}, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(dst));
}

// The backward moves raw bits: fn(dd, ds) as uint32_t (f32) or uint16_t (16-bit) buffers.
template <typename Fn>
void with_raw_bits(size_t elem_bytes, const void* dd, void* ds, const Fn& fn) {
  if (elem_bytes == 4)
    fn(static_cast<const uint32_t*>(dd), static_cast<uint32_t*>(ds));
  else
    fn(static_cast<const uint16_t*>(dd), static_cast<uint16_t*>(ds));
}

// The NHWC vector paths (x, dst: [N, H, W, C] and [N, OH, OW, C] memory of dtype dt; the
// backward's dd and ds likewise, moved as raw bits of elem_bytes). Call only when
// has_avx512() (resp. has_avx2()).
void forward_nhwc_avx512(DType dt, const void* x, void* dst, uint8_t* arg, bool packed, int64_t N, int64_t C,
                         int64_t H, int64_t W, int64_t k);
void backward_nhwc_avx512(size_t elem_bytes, const void* dd, const uint8_t* arg, bool packed, void* ds, int64_t N,
                          int64_t C, int64_t H, int64_t W, int64_t k);
void forward_nhwc_avx2(DType dt, const void* x, void* dst, uint8_t* arg, bool packed, int64_t N, int64_t C,
                       int64_t H, int64_t W, int64_t k);
void backward_nhwc_avx2(size_t elem_bytes, const void* dd, const uint8_t* arg, bool packed, void* ds, int64_t N,
                        int64_t C, int64_t H, int64_t W, int64_t k);

}  // namespace mixprec::backend::cpu::relu_pool
