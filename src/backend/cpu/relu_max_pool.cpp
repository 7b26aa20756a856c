// backend/cpu/relu_max_pool.cpp: fused ReLU + max pooling kernels (see relu_max_pool.h).
// Letters: N batch, C channels, H/W input, OH/OW output (= H/k, W/k, floor), k window.
//
// Paths:
// - NHWC on AVX-512 (the hot path: the convolutions return channels-last): 16 channels
//   per vector, compared in f32 (bf16/f16 widened exactly), running maximum starting at
//   +0 with a strict ">" so the first maximum wins and windows <= 0 keep argmax 255; the
//   first NaN of a window beats every number, as relu + max_pool2d propagate NaN in PyTorch.
//   Backward writes every diff_src element once: diff_dst where the argmax names that
//   window position, else +0 (a pure select on the raw bits, no arithmetic).
// - Everything else (NCHW, no AVX-512): the same rule in scalar loops over strides.
// Threads: OpenMP over N*OH output rows (forward) / N*H input rows (backward) for NHWC,
// N*C*OH / N*C*H rows for the scalar path; skipped below ~32K elements, where the fork
// costs more than the work (limits.md §1.5).
#include "backend/cpu/relu_max_pool.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "mixprec/half.h"

namespace mixprec::backend::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

float load_scalar(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return detail::bfloat16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return detail::half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

// Copies element i of src to element o of dst, raw bits (the maximum is one of the inputs).
void copy_raw(const void* src, int64_t i, void* dst, int64_t o, size_t es) {
  std::memcpy(static_cast<char*>(dst) + o * es, static_cast<const char*>(src) + i * es, es);
}

bool has_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

// ---- scalar path: any strides ------------------------------------------------------

void forward_scalar(const Tensor& x, Tensor& dst, Tensor& arg, int64_t k) {
  const int64_t N = x.size(0), C = x.size(1), OH = dst.size(2), OW = dst.size(3);
  const Shape &xs = x.strides(), &ds = dst.strides();
  const DType dt = x.dtype();
  const size_t es = dtype_size(dt);
  const void* xp = x.data();
  void* dp = dst.data();
  uint8_t* ap = arg.data_ptr<uint8_t>();
  const int64_t rows = N * C * OH;
#pragma omp parallel for schedule(static) if (dst.numel() * k * k > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / (C * OH), c = (r / OH) % C, oh = r % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      float m = 0.0f;
      int64_t best = -1;
      uint8_t pos = kNoArgmax;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t off = n * xs[0] + c * xs[1] + (oh * k + i) * xs[2] + (ow * k + j) * xs[3];
          const float v = load_scalar(xp, dt, off);
          // Strict: the first maximum wins; the first NaN beats every number.
          if (v > m || (std::isnan(v) && !std::isnan(m))) {
            m = v;
            best = off;
            pos = static_cast<uint8_t>(i * k + j);
          }
        }
      const int64_t o = n * ds[0] + c * ds[1] + oh * ds[2] + ow * ds[3];
      if (best >= 0) {
        copy_raw(xp, best, dp, o, es);
      } else {
        std::memset(static_cast<char*>(dp) + o * es, 0, es);  // +0 in every dtype
      }
      ap[o] = pos;
    }
  }
}

void backward_scalar(const Tensor& dd, const Tensor& arg, Tensor& diff_src, int64_t k) {
  const int64_t N = diff_src.size(0), C = diff_src.size(1), H = diff_src.size(2),
                W = diff_src.size(3), OH = arg.size(2), OW = arg.size(3);
  const Shape &ss = diff_src.strides(), &as = arg.strides();
  const size_t es = dtype_size(diff_src.dtype());
  const void* gp = dd.data();
  void* sp = diff_src.data();
  const uint8_t* ap = arg.data_ptr<uint8_t>();
  const int64_t rows = N * C * H;
#pragma omp parallel for schedule(static) if (diff_src.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / (C * H), c = (r / H) % C, h = r % H;
    for (int64_t w = 0; w < W; ++w) {
      const int64_t o = n * ss[0] + c * ss[1] + h * ss[2] + w * ss[3];
      const int64_t oh = h / k, ow = w / k;
      if (oh < OH && ow < OW) {
        const int64_t a = n * as[0] + c * as[1] + oh * as[2] + ow * as[3];  // dd has arg's strides
        if (ap[a] == (h % k) * k + (w % k)) {
          copy_raw(gp, a, sp, o, es);
          continue;
        }
      }
      std::memset(static_cast<char*>(sp) + o * es, 0, es);
    }
  }
}

// ---- NHWC AVX-512 path -----------------------------------------------------------

// GCC 12 flags the intrinsics' internal _mm*_undefined_*() as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

template <DType D>
MIXPREC_AVX512 inline __m512 load16(const void* p, __mmask16 m) {
  if constexpr (D == DType::f32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else if constexpr (D == DType::bf16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
}

// v holds values of dtype D (exactly representable), so the narrowing is exact.
template <DType D>
MIXPREC_AVX512 inline void store16(void* p, __m512 v, __mmask16 m) {
  if constexpr (D == DType::f32) {
    _mm512_mask_storeu_ps(p, m, v);
  } else if constexpr (D == DType::bf16) {
    const __m512i hi = _mm512_srli_epi32(_mm512_castps_si512(v), 16);
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(hi));
  } else {
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

// x: [N, H, W, C] memory; dst/arg: [N, OH, OW, C].
template <DType D, typename T>
MIXPREC_AVX512 void forward_nhwc(const T* x, T* dst, uint8_t* arg, int64_t N, int64_t C,
                                 int64_t H, int64_t W, int64_t k) {
  const int64_t OH = H / k, OW = W / k, rows = N * OH;
#pragma omp parallel for schedule(static) if (rows * OW * C * k * k > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / OH, oh = r % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t o = ((n * OH + oh) * OW + ow) * C;
      const T* win = x + ((n * H + oh * k) * W + ow * k) * C;  // window's top-left pixel
      for (int64_t c0 = 0; c0 < C; c0 += 16) {
        const __mmask16 m = C - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (C - c0)) - 1);
        __m512 best = _mm512_setzero_ps();
        __m512i pos = _mm512_set1_epi32(kNoArgmax);
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const __m512 v = load16<D>(win + (i * W + j) * C + c0, m);
            // Ordered ">": the first maximum wins, windows <= 0 keep +0; a NaN wins over
            // a best that is not NaN yet.
            const __mmask16 nan_first = _mm512_mask_cmp_ps_mask(_mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q),
                                                                best, best, _CMP_ORD_Q);
            const __mmask16 gt = _mm512_mask_cmp_ps_mask(m, v, best, _CMP_GT_OQ) | nan_first;
            best = _mm512_mask_mov_ps(best, gt, v);
            pos = _mm512_mask_mov_epi32(pos, gt, _mm512_set1_epi32(static_cast<int>(i * k + j)));
          }
        store16<D>(dst + o + c0, best, m);
        _mm_mask_storeu_epi8(arg + o + c0, m, _mm512_cvtepi32_epi8(pos));
      }
    }
  }
}

// dd/arg: [N, OH, OW, C]; diff_src: [N, H, W, C]. 16-bit dtypes move 32 lanes at a time.
template <typename T>
MIXPREC_AVX512 void backward_nhwc(const T* dd, const uint8_t* arg, T* ds, int64_t N, int64_t C,
                                  int64_t H, int64_t W, int64_t k) {
  const int64_t OH = H / k, OW = W / k, rows = N * H;
  constexpr int64_t kLanes = sizeof(T) == 4 ? 16 : 32;
#pragma omp parallel for schedule(static) if (rows * W * C > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / H, h = r % H, oh = h / k;
    T* out = ds + (n * H + h) * W * C;
    if (oh >= OH) {  // the row floor mode dropped
      std::memset(out, 0, sizeof(T) * W * C);
      continue;
    }
    for (int64_t w = 0; w < OW * k; ++w) {
      const int64_t ow = w / k, o = ((n * OH + oh) * OW + ow) * C;
      const int pos = static_cast<int>((h % k) * k + (w % k));
      for (int64_t c0 = 0; c0 < C; c0 += kLanes) {
        const int64_t rem = C - c0;
        if constexpr (sizeof(T) == 4) {
          const __mmask16 m = rem >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rem) - 1);
          const __m512i a = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, arg + o + c0));
          const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(m, a, _mm512_set1_epi32(pos));
          const __m512i g = _mm512_maskz_loadu_epi32(hit, dd + o + c0);
          _mm512_mask_storeu_epi32(out + w * C + c0, m, g);
        } else {
          const __mmask32 m = rem >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << rem) - 1);
          const __m512i a = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, arg + o + c0));
          const __mmask32 hit =
              _mm512_mask_cmpeq_epi16_mask(m, a, _mm512_set1_epi16(static_cast<short>(pos)));
          const __m512i g = _mm512_maskz_loadu_epi16(hit, dd + o + c0);
          _mm512_mask_storeu_epi16(out + w * C + c0, m, g);
        }
      }
    }
    if (OW * k < W) std::memset(out + OW * k * C, 0, sizeof(T) * (W - OW * k) * C);
  }
}

#pragma GCC diagnostic pop

void check_kernel(const char* op, int64_t kernel) {
  if (kernel < 1 || kernel > 15)
    bad(std::string(op) + ": kernel " + std::to_string(kernel) +
        " must be in 1..15 (the argmax is one byte and 255 means 'no maximum > 0')");
}

}  // namespace

ReluMaxPoolResult relu_max_pool2d_forward(const Tensor& src, int64_t kernel) {
  const char* op = "relu_max_pool2d_forward";
  check_kernel(op, kernel);
  if (src.dim() != 4) bad(std::string(op) + ": src " + src.str() + " must be 4-D [N, C, H, W]");
  const DType dt = src.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    bad(std::string(op) + ": src dtype " + dtype_name(dt) + " unsupported (expected f32, bf16 or f16)");
  if (src.size(2) < kernel || src.size(3) < kernel)
    bad(std::string(op) + ": kernel " + std::to_string(kernel) + " is larger than src " +
        shape_str(src.shape()));
  const Tensor x = src.is_dense() ? src : src.contiguous();
  const MemoryFormat f = x.suggest_memory_format();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const Shape out_shape{N, C, H / kernel, W / kernel};
  ReluMaxPoolResult r{Tensor::empty(out_shape, dt, f), Tensor::empty(out_shape, DType::u8, f)};
  if (r.dst.numel() == 0) return r;
  const bool nhwc = f == MemoryFormat::channels_last && !x.is_contiguous();
  if (nhwc && has_avx512()) {
    uint8_t* arg = r.argmax.data_ptr<uint8_t>();
    if (dt == DType::f32)
      forward_nhwc<DType::f32>(x.data_ptr<float>(), r.dst.data_ptr<float>(), arg, N, C, H, W, kernel);
    else if (dt == DType::bf16)
      forward_nhwc<DType::bf16>(x.data_ptr<uint16_t>(), r.dst.data_ptr<uint16_t>(), arg, N, C, H, W,
                                kernel);
    else
      forward_nhwc<DType::f16>(x.data_ptr<uint16_t>(), r.dst.data_ptr<uint16_t>(), arg, N, C, H, W,
                               kernel);
  } else {
    forward_scalar(x, r.dst, r.argmax, kernel);
  }
  return r;
}

Tensor relu_max_pool2d_backward(const Tensor& diff_dst, const Tensor& argmax,
                                const Shape& src_shape, int64_t kernel) {
  const char* op = "relu_max_pool2d_backward";
  check_kernel(op, kernel);
  if (src_shape.size() != 4)
    bad(std::string(op) + ": src shape " + shape_str(src_shape) + " must be 4-D [N, C, H, W]");
  const Shape out_shape{src_shape[0], src_shape[1], src_shape[2] / kernel, src_shape[3] / kernel};
  if (!argmax.defined() || argmax.dtype() != DType::u8 || argmax.shape() != out_shape ||
      !argmax.is_dense())
    bad(std::string(op) + ": argmax " + (argmax.defined() ? argmax.str() : std::string("undefined")) +
        " must be the dense u8 " + shape_str(out_shape) + " tensor the forward returned");
  if (diff_dst.shape() != out_shape)
    bad(std::string(op) + ": diff_dst " + diff_dst.str() + " must have shape " + shape_str(out_shape));
  const DType dt = diff_dst.dtype();
  if (dt != DType::f32 && dt != DType::bf16 && dt != DType::f16)
    bad(std::string(op) + ": diff_dst dtype " + dtype_name(dt) +
        " unsupported (expected f32, bf16 or f16)");
  const MemoryFormat f = argmax.suggest_memory_format();
  // diff_dst must walk the same element order as argmax (the scalar path indexes both with
  // argmax's strides).
  const bool same_order = f == MemoryFormat::channels_last ? diff_dst.is_channels_last()
                                                           : diff_dst.is_contiguous();
  const Tensor dd = same_order ? diff_dst : diff_dst.detach().to_memory_format(f);
  Tensor diff_src = Tensor::empty(src_shape, dt, f);
  if (diff_src.numel() == 0) return diff_src;
  const bool nhwc = f == MemoryFormat::channels_last && !argmax.is_contiguous();
  if (nhwc && has_avx512()) {
    const int64_t N = src_shape[0], C = src_shape[1], H = src_shape[2], W = src_shape[3];
    const uint8_t* arg = argmax.data_ptr<uint8_t>();
    if (dt == DType::f32)
      backward_nhwc(dd.data_ptr<uint32_t>(), arg, diff_src.data_ptr<uint32_t>(), N, C, H, W, kernel);
    else
      backward_nhwc(dd.data_ptr<uint16_t>(), arg, diff_src.data_ptr<uint16_t>(), N, C, H, W, kernel);
  } else {
    backward_scalar(dd, argmax, diff_src, kernel);
  }
  return diff_src;
}

}  // namespace mixprec::backend::cpu
