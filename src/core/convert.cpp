// convert.cpp: every dtype-to-dtype element conversion, scalar rules first, then the vector
// kernels for the hot pairs (f32<->bf16, f32<->f16; f64<->16-bit and f32<->f64 on AVX-512),
// picked at run time: AVX-512 (with AVX512-BF16 for f32 -> bf16), else AVX2 / F16C, else the
// scalar rules.
//
// Rules (one place, so Tensor::to, autocast, data loading and checkpoints agree):
//  - to f16/bf16: round to nearest even exactly once. A double or a wide integer is first
//    narrowed to float with round-to-odd (float has >= 2 more bits than f16/bf16), which makes
//    the final rounding correct instead of double-rounded.
//  - float -> integer: truncate toward zero; NaN gives 0 and out-of-range values saturate
//    (C++ leaves both undefined; saturating is the choice Rust and numpy's clip make).
//  - integer -> integer: wraps modulo 2^bits, as PyTorch's .to() does.
//  - integer -> f32/f64: rounds to nearest even (the cvtsi2ss/sd default).
//
// Vector kernels must give the scalar bits for every input. Two hardware facts matter:
//  - VCVTNEPS2BF16 flushes f32 subnormal inputs to +-0 (measured here: 0x007fffff -> 0x0000,
//    where rounding gives 0x0080). We keep subnormals (PyTorch's scalar c10::BFloat16 does),
//    so a 32-element block holding any f32 subnormal takes the scalar path. Its NaN rule
//    (truncate, set the quiet bit) is the one half.h uses.
//  - VCVTPH2PS quiets signalling NaNs; half.h widens the same way. VCVTPS2PH with an
//    explicit RNE immediate ignores MXCSR rounding and FTZ, matching half.h's integer code.
// Longer than 400 lines on purpose: the scalar rules and every vector kernel that must give
// their bits (f32 <-> 16-bit on AVX-512/AVX2/F16C, f64 <-> 16-bit through round-to-odd) stay
// side by side, so a rule and its vector forms are read and changed together.
#include "core/convert.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/convert_simd.h"
#include "core/cpu_features.h"
#include "mixprec/core/half.h"
#include "mixprec/core/status.h"

namespace mixprec {
namespace {

using Kernel = void (*)(const void* src, void* dst, int64_t n);

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// ---- Scalar element rules -------------------------------------------------------------

// Round-to-odd narrowing: truncate toward zero, then set the last bit if anything was lost.
float round_to_odd_f32(double d) {
  if (!(std::fabs(d) <= std::numeric_limits<double>::max())) return static_cast<float>(d);
  float t = static_cast<float>(d);
  uint32_t bits = std::bit_cast<uint32_t>(t);
  if (std::fabs(static_cast<double>(t)) > std::fabs(d)) --bits;  // one step toward zero
  t = std::bit_cast<float>(bits);
  if (static_cast<double>(t) != d) bits |= 1u;
  return std::bit_cast<float>(bits);
}

float round_to_odd_f32(int64_t v) {
  const uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  float magnitude;
  if (u < (uint64_t{1} << 24)) {
    magnitude = static_cast<float>(u);  // exact
  } else {
    const int shift = (63 - std::countl_zero(u)) - 23;  // keep the top 24 bits
    uint64_t kept = u >> shift;
    if (u & ((uint64_t{1} << shift) - 1)) kept |= 1;  // sticky
    magnitude = std::ldexp(static_cast<float>(kept), shift);
  }
  return v < 0 ? -magnitude : magnitude;
}

// The float that rounds to the same 16-bit value as x itself would.
template <typename Src>
float narrowing_source(Src x) {
  if constexpr (std::is_same_v<Src, double>) return round_to_odd_f32(x);
  else if constexpr (std::is_same_v<Src, int64_t> || std::is_same_v<Src, int32_t>)
    return round_to_odd_f32(static_cast<int64_t>(x));
  else return static_cast<float>(x);  // float, f16, bf16, u8: exact
}

template <typename Src>
double widen(Src x) {
  if constexpr (kIsHalf<Src>) return static_cast<float>(x);
  else return static_cast<double>(x);
}

template <typename Int>
Int float_to_int(double v) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  const double hi = std::ldexp(1.0, std::numeric_limits<Int>::digits);  // first value past max
  const double lo = std::is_signed_v<Int> ? -hi : 0.0;                  // exactly min
  if (v >= hi) return std::numeric_limits<Int>::max();
  if (v < lo) return std::numeric_limits<Int>::min();
  return static_cast<Int>(v);
}

template <typename Dst, typename Src>
Dst cast_element(Src x) {
  if constexpr (std::is_same_v<Dst, Src>) return x;
  else if constexpr (kIsHalf<Dst>) return Dst(narrowing_source(x));
  else if constexpr (std::is_same_v<Dst, float>) return static_cast<float>(x);
  else if constexpr (std::is_same_v<Dst, double>) return widen(x);
  else if constexpr (std::is_integral_v<Src>) return static_cast<Dst>(x);  // wraps
  else return float_to_int<Dst>(widen(x));
}

template <typename Src, typename Dst>
void scalar_kernel(const void* src, void* dst, int64_t n) {
  const Src* s = static_cast<const Src*>(src);
  Dst* d = static_cast<Dst*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = cast_element<Dst>(s[i]);
}

template <typename Src>
Kernel scalar_kernel_to(DType dst) {
  switch (dst) {
    case DType::f32: return scalar_kernel<Src, float>;
    case DType::f16: return scalar_kernel<Src, Half>;
    case DType::bf16: return scalar_kernel<Src, BFloat16>;
    case DType::f64: return scalar_kernel<Src, double>;
    case DType::i64: return scalar_kernel<Src, int64_t>;
    case DType::i32: return scalar_kernel<Src, int32_t>;
    case DType::u8: return scalar_kernel<Src, uint8_t>;
  }
  MIXPREC_CHECK(false, "convert: unknown destination dtype " + std::to_string(static_cast<int>(dst)));
  return nullptr;
}

Kernel scalar_kernel_for(DType src, DType dst) {
  switch (src) {
    case DType::f32: return scalar_kernel_to<float>(dst);
    case DType::f16: return scalar_kernel_to<Half>(dst);
    case DType::bf16: return scalar_kernel_to<BFloat16>(dst);
    case DType::f64: return scalar_kernel_to<double>(dst);
    case DType::i64: return scalar_kernel_to<int64_t>(dst);
    case DType::i32: return scalar_kernel_to<int32_t>(dst);
    case DType::u8: return scalar_kernel_to<uint8_t>(dst);
  }
  MIXPREC_CHECK(false, "convert: unknown source dtype " + std::to_string(static_cast<int>(src)));
  return nullptr;
}

// ---- Vector kernels (compiled per function for their ISA; chosen at run time) -----------
// Tails shorter than a vector go through the scalar kernel, which gives the same bits.
// GCC 12 warns about its own _mm512_undefined_* placeholders inside the intrinsics (a known
// false positive), hence the pragma.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

__attribute__((target("avx512f,avx512bf16"))) __mmask16 subnormal_lanes(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __mmask16 zero_exponent = _mm512_cmpeq_epi32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7f800000)), _mm512_setzero_si512());
  return zero_exponent & _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x007fffff));
}

__attribute__((target("avx512f,avx512bf16"))) void f32_to_bf16_avx512(const void* src, void* dst,
                                                                      int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(s + i);
    const __m512 hi = _mm512_loadu_ps(s + i + 16);
    if ((subnormal_lanes(lo) | subnormal_lanes(hi)) != 0) {
      scalar_kernel<float, BFloat16>(s + i, d + i, 32);  // hardware would flush them
      continue;
    }
    const __m512bh packed = _mm512_cvtne2ps_pbh(hi, lo);  // hi -> upper 16 lanes
    _mm512_storeu_si512(d + i, reinterpret_cast<const __m512i&>(packed));
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(s + i);
    if (subnormal_lanes(v) != 0) {
      scalar_kernel<float, BFloat16>(s + i, d + i, 16);
      continue;
    }
    const __m256bh packed = _mm512_cvtneps_pbh(v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), reinterpret_cast<const __m256i&>(packed));
  }
  scalar_kernel<float, BFloat16>(s + i, d + i, n - i);
}

__attribute__((target("avx512f"))) void bf16_to_f32_avx512(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m512i wide = _mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16);
    _mm512_storeu_si512(d + i, wide);
  }
  scalar_kernel<BFloat16, float>(s + i, d + i, n - i);
}

// AVX2 (no AVX-512): f32 -> bf16 by integer arithmetic, the same rule as BFloat16's scalar
// constructor (simd::f32x8_to_bf16_bits, convert_simd.h).
__attribute__((target("avx2"))) void f32_to_bf16_avx2(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = simd::f32x8_to_bf16_bits(_mm256_loadu_ps(s + i));
    const __m256i hi = simd::f32x8_to_bf16_bits(_mm256_loadu_ps(s + i + 8));
    // packus works per 128-bit lane (lo0-3 hi0-3 lo4-7 hi4-7); the permute restores order.
    // Every value is <= 0xffff, so the unsigned saturation never changes one.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), packed);
  }
  scalar_kernel<float, BFloat16>(s + i, d + i, n - i);
}

__attribute__((target("avx2"))) void bf16_to_f32_avx2(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), wide);
  }
  scalar_kernel<BFloat16, float>(s + i, d + i, n - i);
}

__attribute__((target("avx512f"))) void f32_to_f16_avx512(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), h);
  }
  scalar_kernel<float, Half>(s + i, d + i, n - i);
}

__attribute__((target("avx512f"))) void f16_to_f32_avx512(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(h));
  }
  scalar_kernel<Half, float>(s + i, d + i, n - i);
}

__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  scalar_kernel<float, Half>(s + i, d + i, n - i);
}

__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
  }
  scalar_kernel<Half, float>(s + i, d + i, n - i);
}

// f64 <-> 16-bit (batch norm and the f64 references convert whole activations): through an
// f32 buffer. Narrowing: round-to-odd to f32 (truncate, then set the last bit if anything
// was lost: the scalar rule, round_to_odd_f32, in register form in convert_simd.h) and the
// f32 kernel's single rounding;
// widening: the f32 kernel, then an exact widening.
__attribute__((target("avx512f,avx512vl"))) void f64_to_f32_round_to_odd_avx512(const double* s, float* d,
                                                                                int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(d + i, simd::f64x8_to_f32_round_to_odd(_mm512_loadu_pd(s + i)));
  }
  for (; i < n; ++i) d[i] = round_to_odd_f32(s[i]);
}

template <Kernel F32ToHalf>
void f64_to_half_via_f32(const void* src, void* dst, int64_t n) {
  const double* s = static_cast<const double*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  float buf[1024];
  for (int64_t i = 0; i < n; i += 1024) {
    const int64_t len = std::min<int64_t>(1024, n - i);
    f64_to_f32_round_to_odd_avx512(s + i, buf, len);
    F32ToHalf(buf, d + i, len);
  }
}

template <Kernel HalfToF32>
__attribute__((target("avx512f"))) void half_to_f64_via_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  double* d = static_cast<double*>(dst);
  float buf[1024];
  for (int64_t i = 0; i < n; i += 1024) {
    const int64_t len = std::min<int64_t>(1024, n - i);
    HalfToF32(s + i, buf, len);
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) _mm512_storeu_pd(d + i + j, _mm512_cvtps_pd(_mm256_loadu_ps(buf + j)));
    for (; j < len; ++j) d[i + j] = buf[j];
  }
}

// f32 <-> f64 (float64 references, losses, master-weight copies): the scalar loop is not
// vectorised at -O2. VCVTPS2PD/VCVTPD2PS are the scalar casts' instructions 8 wide (same
// MXCSR rounding, NaN quieting and DAZ/FTZ behaviour), so the bits are the same.
__attribute__((target("avx512f"))) void f32_to_f64_avx512(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  double* d = static_cast<double*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(d + i, _mm512_cvtps_pd(_mm256_loadu_ps(s + i)));
  scalar_kernel<float, double>(s + i, d + i, n - i);
}

__attribute__((target("avx512f"))) void f64_to_f32_avx512(const void* src, void* dst, int64_t n) {
  const double* s = static_cast<const double*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm512_cvtpd_ps(_mm512_loadu_pd(s + i)));
  scalar_kernel<double, float>(s + i, d + i, n - i);
}

#pragma GCC diagnostic pop

Kernel select_kernel(DType src, DType dst) {
  const CpuFeatures& cpu = cpu_features();
  if (src == DType::f32 && dst == DType::bf16) {
    if (cpu.avx512_bf16) return f32_to_bf16_avx512;
    if (cpu.avx2) return f32_to_bf16_avx2;
  }
  if (src == DType::bf16 && dst == DType::f32) {
    if (cpu.avx512f) return bf16_to_f32_avx512;
    if (cpu.avx2) return bf16_to_f32_avx2;
  }
  if (src == DType::f32 && dst == DType::f16) {
    if (cpu.avx512f) return f32_to_f16_avx512;
    if (cpu.f16c) return f32_to_f16_f16c;
  }
  if (src == DType::f16 && dst == DType::f32) {
    if (cpu.avx512f) return f16_to_f32_avx512;
    if (cpu.f16c) return f16_to_f32_f16c;
  }
  if (cpu.avx512f && src == DType::f32 && dst == DType::f64) return f32_to_f64_avx512;
  if (cpu.avx512f && src == DType::f64 && dst == DType::f32) return f64_to_f32_avx512;
  if (cpu.avx512f && cpu.avx512vl) {
    if (src == DType::f64 && dst == DType::bf16 && cpu.avx512_bf16) return f64_to_half_via_f32<f32_to_bf16_avx512>;
    if (src == DType::f64 && dst == DType::f16) return f64_to_half_via_f32<f32_to_f16_avx512>;
    if (src == DType::bf16 && dst == DType::f64) return half_to_f64_via_f32<bf16_to_f32_avx512>;
    if (src == DType::f16 && dst == DType::f64) return half_to_f64_via_f32<f16_to_f32_avx512>;
  }
  return scalar_kernel_for(src, dst);
}

constexpr int kNumDTypes = 7;

struct KernelTable {
  Kernel kernels[kNumDTypes][kNumDTypes];
  KernelTable() {
    for (DType s : kAllDTypes)
      for (DType d : kAllDTypes) kernels[static_cast<int>(s)][static_cast<int>(d)] = select_kernel(s, d);
  }
};

Kernel kernel_for(DType src, DType dst) {
  static const KernelTable table;
  return table.kernels[static_cast<int>(src)][static_cast<int>(dst)];
}

// Below this a conversion is a few tens of microseconds: forking threads would cost more.
constexpr int64_t kParallelThreshold = 100'000;
constexpr int64_t kChunk = 32 * 1024;  // a multiple of every vector width above

void check_dtype(DType d, const char* role) {
  MIXPREC_CHECK(static_cast<unsigned>(d) < kNumDTypes,
                std::string("convert: invalid ") + role + " dtype " + std::to_string(static_cast<int>(d)));
}

}  // namespace

void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  check_dtype(src_dtype, "source");
  check_dtype(dst_dtype, "destination");
  MIXPREC_CHECK(n >= 0, "convert_elements: negative element count " + std::to_string(n));
  if (n == 0) return;
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(src_dtype));
    return;
  }
  const Kernel kernel = kernel_for(src_dtype, dst_dtype);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const size_t src_size = dtype_size(src_dtype);
  const size_t dst_size = dtype_size(dst_dtype);
  if (n < kParallelThreshold || omp_in_parallel() || omp_get_max_threads() == 1) {
    kernel(s, d, n);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    const int64_t len = std::min(kChunk, n - begin);
    kernel(s + begin * src_size, d + begin * dst_size, len);
  }
}

double load_as_double(const void* base, DType dtype, int64_t index) {
  check_dtype(dtype, "source");
  double out = 0.0;
  const char* p = static_cast<const char*>(base) + index * static_cast<int64_t>(dtype_size(dtype));
  scalar_kernel_for(dtype, DType::f64)(p, &out, 1);
  return out;
}

void store_from_double(void* base, DType dtype, int64_t index, double value) {
  check_dtype(dtype, "destination");
  char* p = static_cast<char*>(base) + index * static_cast<int64_t>(dtype_size(dtype));
  scalar_kernel_for(DType::f64, dtype)(&value, p, 1);
}

}  // namespace mixprec
