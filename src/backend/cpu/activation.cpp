// backend/cpu/activation.cpp: see activation.h.
#include "backend/cpu/activation.h"
#include "backend/cpu/gelu_table.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/random.h"
#include "core/vector_exp.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {

namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

std::vector<double> load_dense(const Tensor& t) {
  MIXPREC_CHECK(t.is_dense(), "backend/cpu/activation: load_dense needs a dense tensor, got " + t.str());
  std::vector<double> v(size_t(t.numel()));
  convert_elements(t.data(), t.dtype(), v.data(), DType::f64, t.numel());
  return v;
}

// v in the buffer order of `like`, stored as dtype with like's memory format.
Tensor store_like(const std::vector<double>& v, const Tensor& like, DType dtype) {
  Tensor out = Tensor::empty(like.shape(), dtype, like.suggest_memory_format());
  convert_elements(v.data(), DType::f64, out.data(), dtype, out.numel());
  return out;
}

// diff_dst's values in x's buffer order.
std::vector<double> load_grad_like(const Tensor& diff_dst, const Tensor& x) {
  return load_dense(diff_dst.to_memory_format(x.suggest_memory_format()));
}

constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

// ---- f32 GELU on AVX-512 and on AVX2+FMA (bf16/f16: by table, gelu_table.cpp) ----------
// The double loop below costs ~80 ns per element (libm erf, full-tensor double copies):
// 0.3 s forward + 1.7 s backward for the transformer's [4096, 1024] activation. These paths
// evaluate 16 (AVX-512) or 8 (AVX2) floats at a time with branch-free polynomials. The
// formula, for z = |x| / sqrt 2 and t = 1 / (1 + z/2):
//   erfc(z) = e^(-z^2) t Q(t),  Phi(x) = erfc(z) / 2 for x <= 0, 1 - erfc(z) / 2 for x > 0,
//   gelu(x) = x Phi(x),  gelu'(x) = Phi(x) + x phi(x),  phi(x) = e^(-x^2/2) / sqrt(2 pi).
// Q(t) = erfcx(z) / t (the scaled complementary error function over t) is smooth on t in
// [0.176, 1] (z <= 9.35; beyond, e^(-z^2) is below the smallest normal float): a degree-8
// polynomial fitted for relative error (scripts/fit_gelu_erfcx.py: 2.4e-7 worst as evaluated
// in f32). Why this form: e^(-z^2) = e^(-x^2/2) is the normal density's exponential too, so
// the backward takes one exp per element instead of two, and the exp's argument is <= 0
// (exp_nonpositive_avx512, a quarter cheaper than exp_avx512). Numerical Recipes' erfcc,
// used before, put its polynomial inside the exp: the backward was 64 vector instructions
// per 16 values, now 40; forward 42, now 38 (Zen 4 runs 512-bit operations at one per
// cycle, so the count is the time). Accuracy: a few f32 ulps relative, the exponent -x^2/2
// itself rounded to f32 on the negative tail (activation_test). The two widths evaluate the
// same formula; they may differ in the last bit (AVX-512 divides by a refined reciprocal
// estimate, AVX2 by vdivps). Without either: the double loop.
constexpr int64_t kBlock = 2048;  // elements per parallel work item (and AVX2 buffer)

constexpr float kQ[9] = {2.820881605e-01f,  2.823451459e-01f, 2.433207482e-01f,
                         2.018364817e-01f,  -2.463213168e-02f, 2.751935124e-01f,
                         -4.847032726e-01f, 2.833755910e-01f, -5.882427841e-02f};

// GCC 12 builds several AVX-512 intrinsics (min/max, roundscale, cvtps_epi32, slli) on
// _mm512_undefined_*(), which -Wmaybe-uninitialized reports at each inlined use: a known
// false positive, silenced for the vector kernels only (popped after the AVX-512 kernels).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// lo + hi * t
__attribute__((target("avx512f"))) inline __m512 linear_in(__m512 t, float lo, float hi) {
  return _mm512_fmadd_ps(_mm512_set1_ps(hi), t, _mm512_set1_ps(lo));
}

// Phi(v), and e = e^(-v^2/2) for the backward's density.
__attribute__((target("avx512f"))) inline __m512 normal_cdf_avx512(__m512 v, __m512& e) {
  e = exp_nonpositive_avx512(_mm512_mul_ps(_mm512_mul_ps(v, _mm512_set1_ps(-0.5f)), v));
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(v), _mm512_set1_ps(float(kInvSqrt2)));
  // t = 1 / den by the 14-bit reciprocal estimate and one Newton step (relative error
  // ~2^-28, below f32 rounding), cheaper than vdivps where the divider is slow.
  const __m512 den = _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f));
  const __m512 r0 = _mm512_rcp14_ps(den);
  const __m512 t = _mm512_mul_ps(r0, _mm512_fnmadd_ps(den, r0, _mm512_set1_ps(2.0f)));
  // Q(t) by Estrin's scheme: four dependent steps instead of Horner's eight.
  const __m512 t2 = _mm512_mul_ps(t, t), t4 = _mm512_mul_ps(t2, t2), t8 = _mm512_mul_ps(t4, t4);
  const __m512 p03 = _mm512_fmadd_ps(linear_in(t, kQ[2], kQ[3]), t2, linear_in(t, kQ[0], kQ[1]));
  const __m512 p47 = _mm512_fmadd_ps(linear_in(t, kQ[6], kQ[7]), t2, linear_in(t, kQ[4], kQ[5]));
  const __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(kQ[8]), t8, _mm512_fmadd_ps(p47, t4, p03));
  const __m512 half_erfc = _mm512_mul_ps(_mm512_mul_ps(t, q), _mm512_mul_ps(e, _mm512_set1_ps(0.5f)));
  const __mmask16 pos = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_mask_sub_ps(half_erfc, pos, _mm512_set1_ps(1.0f), half_erfc);
}

// gelu(v), or g * gelu'(v).
__attribute__((target("avx512f"))) inline __m512 gelu_vector(__m512 v, const __m512* g) {
  __m512 e;
  const __m512 cdf = normal_cdf_avx512(v, e);
  if (g == nullptr) return _mm512_mul_ps(v, cdf);
  const __m512 pdf = _mm512_mul_ps(_mm512_set1_ps(float(kInvSqrt2Pi)), e);
  return _mm512_mul_ps(*g, _mm512_fmadd_ps(v, pdf, cdf));
}

// dst = gelu(x), or with g: dst = g * gelu'(x), len floats. Two independent vectors per
// iteration: the polynomial is one long dependency chain, and interleaving two keeps both
// FMA ports busy.
__attribute__((target("avx512f"))) void gelu_span_avx512(const float* x, const float* g, float* dst, int64_t len) {
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    __m512 ga, gb;
    if (g != nullptr) ga = _mm512_loadu_ps(g + i), gb = _mm512_loadu_ps(g + i + 16);
    const __m512 ra = gelu_vector(a, g ? &ga : nullptr), rb = gelu_vector(b, g ? &gb : nullptr);
    _mm512_storeu_ps(dst + i, ra);
    _mm512_storeu_ps(dst + i + 16, rb);
  }
  for (; i < len; i += 16) {
    const __mmask16 m = lanes16(i, len);
    __m512 gv;
    if (g != nullptr) gv = _mm512_maskz_loadu_ps(m, g + i);
    _mm512_mask_storeu_ps(dst + i, m, gelu_vector(_mm512_maskz_loadu_ps(m, x + i), g ? &gv : nullptr));
  }
}
#pragma GCC diagnostic pop

// The AVX2+FMA twin of the functions above: 8 lanes, the same formula, on f32 buffers.
#define MIXPREC_AVX2_FMA __attribute__((target("avx2,fma")))
MIXPREC_AVX2_FMA inline __m256 linear_in(__m256 t, float lo, float hi) {
  return _mm256_fmadd_ps(_mm256_set1_ps(hi), t, _mm256_set1_ps(lo));
}

MIXPREC_AVX2_FMA inline __m256 normal_cdf_avx2(__m256 v, __m256& e) {
  e = exp_avx2(_mm256_mul_ps(_mm256_mul_ps(v, _mm256_set1_ps(-0.5f)), v));
  const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), _mm256_set1_ps(float(kInvSqrt2)));
  const __m256 den = _mm256_fmadd_ps(z, _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f));
  // AVX2 has only a 12-bit reciprocal estimate; one Newton step would leave ~2^-22, so divide.
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), den);
  const __m256 t2 = _mm256_mul_ps(t, t), t4 = _mm256_mul_ps(t2, t2), t8 = _mm256_mul_ps(t4, t4);
  const __m256 p03 = _mm256_fmadd_ps(linear_in(t, kQ[2], kQ[3]), t2, linear_in(t, kQ[0], kQ[1]));
  const __m256 p47 = _mm256_fmadd_ps(linear_in(t, kQ[6], kQ[7]), t2, linear_in(t, kQ[4], kQ[5]));
  const __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(kQ[8]), t8, _mm256_fmadd_ps(p47, t4, p03));
  const __m256 half_erfc = _mm256_mul_ps(_mm256_mul_ps(t, q), _mm256_mul_ps(e, _mm256_set1_ps(0.5f)));
  const __m256 pos = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ);
  return _mm256_blendv_ps(half_erfc, _mm256_sub_ps(_mm256_set1_ps(1.0f), half_erfc), pos);
}

MIXPREC_AVX2_FMA inline __m256 gelu_vector(__m256 v, const float* g) {
  __m256 e;
  const __m256 cdf = normal_cdf_avx2(v, e);
  if (g == nullptr) return _mm256_mul_ps(v, cdf);
  const __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(float(kInvSqrt2Pi)), e);
  return _mm256_mul_ps(_mm256_loadu_ps(g), _mm256_fmadd_ps(v, pdf, cdf));
}

// In place over len floats: x = gelu(x), or with g: x = g * gelu'(x); the tail goes
// through a zero-padded vector.
MIXPREC_AVX2_FMA void gelu_block_avx2(float* x, const float* g, int64_t len) {
  int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    const __m256 ra = gelu_vector(_mm256_loadu_ps(x + i), g ? g + i : nullptr);
    const __m256 rb = gelu_vector(_mm256_loadu_ps(x + i + 8), g ? g + i + 8 : nullptr);
    _mm256_storeu_ps(x + i, ra);
    _mm256_storeu_ps(x + i + 8, rb);
  }
  for (; i < len; i += 8) {
    const int64_t m = std::min<int64_t>(8, len - i);
    alignas(32) float xv[8] = {}, gv[8] = {};
    std::copy(x + i, x + i + m, xv);
    if (g) std::copy(g + i, g + i + m, gv);
    _mm256_store_ps(xv, gelu_vector(_mm256_load_ps(xv), g ? gv : nullptr));
    std::copy(xv, xv + m, x + i);
  }
}
#undef MIXPREC_AVX2_FMA

// The vector width this CPU runs f32 GELU at: 16 (AVX-512), 8 (AVX2+FMA), or 0 (the double
// loop).
int gelu_vector_lanes() {
  if (cpu_features().avx512f) return 16;
  if (cpu_features().avx2 && cpu_features().fma) return 8;
  return 0;
}

// dst = gelu(src) (diff_dst null) or dst = diff_dst * gelu'(src), n dense floats, kBlock
// values a work item (AVX2: through a thread-local copy, as its kernel works in place).
void gelu_f32_path(const float* src, const float* diff_dst, float* dst, int64_t n) {
  const bool wide = gelu_vector_lanes() == 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t off = b * kBlock, len = std::min(kBlock, n - off);
    const float* g = diff_dst ? diff_dst + off : nullptr;
    if (wide) {
      gelu_span_avx512(src + off, g, dst + off, len);
    } else {
      std::copy(src + off, src + off + len, dst + off);
      gelu_block_avx2(dst + off, g, len);
    }
  }
}

bool is_16bit(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

}  // namespace

Tensor gelu_forward(const Tensor& x) {
  if (is_16bit(x.dtype())) {
    Tensor dst = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
    gelu16_path(x.data(), nullptr, dst.data(), x.dtype(), x.numel());
    return dst;
  }
  if (x.dtype() == DType::f32 && gelu_vector_lanes() > 0) {
    Tensor dst = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
    gelu_f32_path(static_cast<const float*>(x.data()), nullptr, static_cast<float*>(dst.data()), x.numel());
    return dst;
  }
  const std::vector<double> xv = load_dense(x);
  std::vector<double> y(xv.size());
  const int64_t n = int64_t(xv.size());
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    y[size_t(i)] = 0.5 * xv[size_t(i)] * (1.0 + std::erf(xv[size_t(i)] * kInvSqrt2));
  return store_like(y, x, x.dtype());
}

Tensor gelu_backward(const Tensor& x, const Tensor& diff_dst) {
  if (is_16bit(x.dtype()) && diff_dst.dtype() == x.dtype()) {
    const Tensor g = diff_dst.to_memory_format(x.suggest_memory_format());
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
    gelu16_path(x.data(), g.data(), dx.data(), x.dtype(), x.numel());
    return dx;
  }
  if (x.dtype() == DType::f32 && diff_dst.dtype() == DType::f32 && gelu_vector_lanes() > 0) {
    const Tensor g = diff_dst.to_memory_format(x.suggest_memory_format());
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
    gelu_f32_path(static_cast<const float*>(x.data()), static_cast<const float*>(g.data()),
                  static_cast<float*>(dx.data()), x.numel());
    return dx;
  }
  const std::vector<double> xv = load_dense(x), dy = load_grad_like(diff_dst, x);
  std::vector<double> dx(xv.size());
  const int64_t n = int64_t(xv.size());
  // d/dx [x Phi(x)] = Phi(x) + x phi(x)
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const double v = xv[size_t(i)];
    const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
    const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
    dx[size_t(i)] = dy[size_t(i)] * (cdf + v * pdf);
  }
  return store_like(dx, x, x.dtype());
}

std::shared_ptr<const std::vector<uint8_t>> dropout_mask(int64_t n, double p) {
  auto keep = std::make_shared<std::vector<uint8_t>>(size_t(n));
  // One draw from the global generator keys the whole mask (manual_seed and the checkpointed
  // generator state decide it, as before); element pair j takes the two 32-bit halves of
  // splitmix64(key + j), a counter-based stream in the spirit of PyTorch's Philox: the same
  // mask whatever the thread count, and threads fill it in parallel. (One sequential
  // mt19937_64 draw per element was a quarter of a BERT-style step.)
  const uint64_t key = global_generator()();
  uint8_t* k = keep->data();
  const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t j = 0; j < pairs; ++j) {
    uint64_t z = key + uint64_t(j) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    k[2 * j] = double(uint32_t(z)) * 0x1.0p-32 >= p ? 1 : 0;
    if (2 * j + 1 < n) k[2 * j + 1] = double(uint32_t(z >> 32)) * 0x1.0p-32 >= p ? 1 : 0;
  }
  return keep;
}

namespace {

// out = keep ? in * scale : 0, element by element in buffer order, computed in double and
// rounded once to `dtype`; in blocks on the stack instead of whole double copies.
void masked_scale(const void* in, DType in_dtype, void* out, DType dtype, const uint8_t* keep, double scale,
                  int64_t n) {
  constexpr int64_t kBlock = 2048;
  const size_t in_size = dtype_size(in_dtype), out_size = dtype_size(dtype);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    double buf[kBlock];
    const int64_t at = b * kBlock, len = std::min(kBlock, n - at);
    convert_elements(static_cast<const char*>(in) + at * int64_t(in_size), in_dtype, buf, DType::f64, len);
    for (int64_t i = 0; i < len; ++i) buf[i] = keep[at + i] ? buf[i] * scale : 0.0;
    convert_elements(buf, DType::f64, static_cast<char*>(out) + at * int64_t(out_size), dtype, len);
  }
}

}  // namespace

Tensor dropout_forward(const Tensor& x, const std::vector<uint8_t>& keep, double scale) {
  MIXPREC_CHECK(x.is_dense(), "dropout: needs a dense tensor, got " + x.str());
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
  masked_scale(x.data(), x.dtype(), out.data(), x.dtype(), keep.data(), scale, x.numel());
  return out;
}

Tensor dropout_backward(const Tensor& diff_dst, const std::vector<uint8_t>& keep, double scale,
                        const Shape& shape, MemoryFormat format, DType dtype) {
  const Tensor dy = diff_dst.to_memory_format(format);
  MIXPREC_CHECK(dy.is_dense(), "dropout backward: needs a dense gradient, got " + dy.str());
  Tensor g = Tensor::empty(shape, dtype, format);
  masked_scale(dy.data(), dy.dtype(), g.data(), dtype, keep.data(), scale, g.numel());
  return g;
}

Tensor pow_forward(const Tensor& x, double exponent) {
  const std::vector<double> xv = load_dense(x);
  std::vector<double> y(xv.size());
  const int64_t n = int64_t(xv.size());
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = std::pow(xv[size_t(i)], exponent);
  return store_like(y, x, x.dtype());
}

Tensor pow_backward(const Tensor& x, const Tensor& diff_dst, double exponent) {
  const std::vector<double> xv = load_dense(x);
  const std::vector<double> dy = load_dense(diff_dst.to_memory_format(x.suggest_memory_format()));
  std::vector<double> dx(xv.size(), 0.0);  // exponent 0: a constant, gradient 0 (PyTorch)
  const int64_t n = int64_t(xv.size());
  if (exponent != 0.0) {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      dx[size_t(i)] = dy[size_t(i)] * exponent * std::pow(xv[size_t(i)], exponent - 1.0);
  }
  return store_like(dx, x, x.dtype());
}

}  // namespace mixprec::backend::cpu
