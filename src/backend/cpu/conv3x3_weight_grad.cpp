// backend/cpu/conv3x3_weight_grad.cpp: a bf16 3x3 convolution's weight gradient on
// AVX512-BF16 (see conv3x3_weight_grad.h).
// Letters: N batch, C input channels, O output channels, H x W the image (= the output: stride
// 1, padding 1), J = ceil(W / 2) pixel pairs a row, t = kh * 3 + kw the tap.
//
// Per image, two pair buffers (32-bit words, two bf16: the pixel 2j in the low half, 2j + 1 in
// the high half, as vdpbf16ps pairs its lanes' halves):
//   dy pairs [H][J][O]         dY's row h; a missing 2j + 1 (odd W) is 0
//   x pairs  [H][3][J][Cp]     X's row r shifted by kw - 1 columns: the words of pixels
//                              (2j + kw - 1, 2j + kw), 0 outside the row (the padding) and for
//                              channels c >= C (Cp: C rounded up to 16)
// Then the tap t's gradient for channels c..c+R and outputs o..o+16 OB is, summed over the
// output rows h whose input row r = h + kh - 1 exists and over j, the vdpbf16ps of the x word
// (r, kw, j, c) broadcast with the dy words (h, j, o..): R x OB accumulators in registers
// (R 4 for 32-64 outputs a block, 8 for 16, so that 8 or more chains hide the latency). The
// accumulators live per thread in f32 [9][Cp][O], loaded and stored once per (image, block).
// The images are shared among the threads in order; their partial sums are added in thread
// order, each output channel's by one thread. The bias gradient is dY's sum, taken while
// repacking it.
#include "backend/cpu/conv3x3_weight_grad.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/cpu_features.h"

namespace mixprec::backend::cpu {
namespace {

// The pair buffers of one image must stay in the cache for the 9 x C / R x O / 64 passes over
// them: images larger than this go to oneDNN.
constexpr int64_t kMaxPairBytes = int64_t(1) << 20;
// The threads' partial sums (9 x C x O floats each) stay within this: a wide layer on many
// cores shares its images among fewer threads rather than hold hundreds of MB of them.
constexpr int64_t kMaxPartialBytes = int64_t(64) << 20;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// GCC 12 flags the intrinsics' internal _mm*_undefined_*() as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MIXPREC_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// 16 words: lo's bf16 in the low halves, hi's in the high halves (a null row reads as 0); m
// the lanes to read.
MIXPREC_BF16_TARGET inline __m512i pair16(const uint16_t* lo, const uint16_t* hi, __mmask16 m) {
  const __m512i a = lo ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo)) : _mm512_setzero_si512();
  const __m512i b = hi ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi)) : _mm512_setzero_si512();
  return _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
}

struct Geometry {
  int64_t N, C, H, W, O, J, Cp;
};

// Image n's x pairs; x is channels-last.
MIXPREC_BF16_TARGET void pack_x(const uint16_t* x, const Geometry& g, uint32_t* xp) {
  for (int64_t r = 0; r < g.H; ++r)
    for (int64_t kw = 0; kw < 3; ++kw)
      for (int64_t j = 0; j < g.J; ++j) {
        const int64_t w0 = 2 * j + kw - 1, w1 = w0 + 1;
        const uint16_t* lo = w0 >= 0 && w0 < g.W ? x + (r * g.W + w0) * g.C : nullptr;
        const uint16_t* hi = w1 >= 0 && w1 < g.W ? x + (r * g.W + w1) * g.C : nullptr;
        uint32_t* out = xp + ((r * 3 + kw) * g.J + j) * g.Cp;
        for (int64_t c = 0; c < g.Cp; c += 16)
          _mm512_storeu_si512(out + c, pair16(lo ? lo + c : nullptr, hi ? hi + c : nullptr, lanes16_any(c, g.C)));
      }
}

// Image n's dy pairs; dy is channels-last. Adds dY's values to bias (f32 [O]) when given.
MIXPREC_BF16_TARGET void pack_dy(const uint16_t* dy, const Geometry& g, uint32_t* dp, float* bias) {
  for (int64_t h = 0; h < g.H; ++h)
    for (int64_t j = 0; j < g.J; ++j) {
      const uint16_t* lo = dy + (h * g.W + 2 * j) * g.O;
      const uint16_t* hi = 2 * j + 1 < g.W ? lo + g.O : nullptr;
      uint32_t* out = dp + (h * g.J + j) * g.O;
      for (int64_t o = 0; o < g.O; o += 16) {
        const __m512i w = pair16(lo + o, hi ? hi + o : nullptr, 0xFFFF);
        _mm512_storeu_si512(out + o, w);
        if (bias) {  // bf16 -> f32 is the word's half moved to the top
          const __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
          const __m512 b = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int(0xFFFF0000u))));
          _mm512_storeu_ps(bias + o, _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(bias + o), a), b));
        }
      }
    }
}

// Tap (kh, kw), channels c0..c0+R, outputs o0..o0+16 OB of one image: acc (f32, rows of O
// floats) += the pairs' products.
template <int OB, int R>
MIXPREC_BF16_TARGET void accumulate_block(const uint32_t* xp, const uint32_t* dp, const Geometry& g, int64_t kh,
                                          int64_t kw, int64_t c0, int64_t o0, float* acc) {
  __m512 a[R][OB];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < OB; ++v) a[i][v] = _mm512_loadu_ps(acc + i * g.O + o0 + 16 * v);
  const int64_t h_begin = std::max<int64_t>(0, 1 - kh), h_end = std::min<int64_t>(g.H, g.H + 1 - kh);
  for (int64_t h = h_begin; h < h_end; ++h) {
    const uint32_t* d = dp + h * g.J * g.O + o0;
    const uint32_t* x = xp + ((h + kh - 1) * 3 + kw) * g.J * g.Cp + c0;
    for (int64_t j = 0; j < g.J; ++j, d += g.O, x += g.Cp) {
      // Unrolled: as loops, GCC 12 keeps the accumulators in memory (a load and a store per
      // vdpbf16ps, 2.5x slower).
      __m512bh b[OB];
#pragma GCC unroll 4
      for (int v = 0; v < OB; ++v) b[v] = (__m512bh)_mm512_loadu_si512(d + 16 * v);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m512bh s = (__m512bh)_mm512_set1_epi32(int(x[i]));
#pragma GCC unroll 4
        for (int v = 0; v < OB; ++v) a[i][v] = _mm512_dpbf16_ps(a[i][v], s, b[v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < OB; ++v) _mm512_storeu_ps(acc + i * g.O + o0 + 16 * v, a[i][v]);
}

template <int OB, int R>
void accumulate_chunk(const uint32_t* xp, const uint32_t* dp, const Geometry& g, int64_t o0, float* acc) {
  const int64_t c_end = round_up(g.C, R);
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t c0 = 0; c0 < c_end; c0 += R)
      accumulate_block<OB, R>(xp, dp, g, t / 3, t % 3, c0, o0, acc + (t * g.Cp + c0) * g.O);
}

// One image into a thread's accumulators acc [9][Cp][O].
void accumulate_image(const uint32_t* xp, const uint32_t* dp, const Geometry& g, float* acc) {
  for (int64_t o0 = 0; o0 < g.O; o0 += 64) switch (std::min<int64_t>(4, (g.O - o0) / 16)) {
      case 1: accumulate_chunk<1, 8>(xp, dp, g, o0, acc); break;
      case 2: accumulate_chunk<2, 4>(xp, dp, g, o0, acc); break;
      case 3: accumulate_chunk<3, 4>(xp, dp, g, o0, acc); break;
      default: accumulate_chunk<4, 4>(xp, dp, g, o0, acc); break;
    }
}

#pragma GCC diagnostic pop

std::vector<uint32_t>& pair_buffer() {
  static thread_local std::vector<uint32_t> buf;
  return buf;
}

}  // namespace

bool conv3x3_weight_grad_applies(const Tensor& src, const Tensor& diff_dst, const Shape& weights_shape,
                                 const Conv2dParams& p) {
  if (!src.defined() || !diff_dst.defined() || src.dim() != 4 || diff_dst.dim() != 4 || weights_shape.size() != 4)
    return false;
  if (src.dtype() != DType::bf16 || diff_dst.dtype() != DType::bf16 || !cpu_features().avx512_bf16) return false;
  const int64_t N = src.size(0), C = src.size(1), H = src.size(2), W = src.size(3), O = weights_shape[0];
  if (p.stride_h != 1 || p.stride_w != 1 || p.pad_h != 1 || p.pad_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      p.groups != 1)
    return false;
  if (weights_shape[1] != C || weights_shape[2] != 3 || weights_shape[3] != 3 || O % 16 != 0 || O < 32)
    return false;
  if (diff_dst.size(0) != N || diff_dst.size(1) != O || diff_dst.size(2) != H || diff_dst.size(3) != W) return false;
  const int64_t J = (W + 1) / 2;
  const int64_t pair_bytes = 4 * H * J * (3 * round_up(C, 16) + O);
  return N >= 1 && H >= 1 && W >= 1 && pair_bytes <= kMaxPairBytes;
}

Conv3x3WeightGrads conv3x3_weight_grad(const Tensor& src_in, const Tensor& diff_dst_in, const Shape& weights_shape,
                                       bool with_bias) {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  if (!conv3x3_weight_grad_applies(src_in, diff_dst_in, weights_shape, p))
    throw Error(Status::invalid_argument("conv3x3_weight_grad: src " + src_in.str() + ", diff_dst " +
                                         diff_dst_in.str() + " and weights " + shape_str(weights_shape) +
                                         " are not a case of this kernel"));
  const Tensor x = src_in.to_memory_format(MemoryFormat::channels_last);
  const Tensor dy = diff_dst_in.to_memory_format(MemoryFormat::channels_last);
  Geometry g{};
  g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3), g.O = weights_shape[0];
  g.J = (g.W + 1) / 2, g.Cp = round_up(g.C, 16);
  const int64_t per_thread = 9 * g.Cp * g.O + g.O;  // accumulators, then the bias sums
  const int64_t by_memory = std::max<int64_t>(1, kMaxPartialBytes / (4 * per_thread));
  const int threads = int(std::max<int64_t>(1, std::min({int64_t(omp_get_max_threads()), g.N, by_memory})));
  static thread_local std::vector<float> partials;  // the calling thread's: a pointer for the team
  partials.assign(size_t(per_thread * threads), 0.f);
  float* const sums = partials.data();
  Conv3x3WeightGrads out;
  out.diff_weights = Tensor::empty({g.O, g.C, 3, 3}, DType::f32);
  if (with_bias) out.diff_bias = Tensor::empty({g.O}, DType::f32);
  float* const dw = out.diff_weights.data_ptr<float>();
  float* const db = with_bias ? out.diff_bias.data_ptr<float>() : nullptr;
  const uint16_t* xs = static_cast<const uint16_t*>(x.data());
  const uint16_t* ds = static_cast<const uint16_t*>(dy.data());
  const int64_t x_image = g.H * g.W * g.C, dy_image = g.H * g.W * g.O;
  const int64_t xp_words = g.H * 3 * g.J * g.Cp, dp_words = g.H * g.J * g.O;
#pragma omp parallel num_threads(threads)
  {
    // The team may be smaller than asked for (a nested region): its shares cover every image.
    const int th = omp_get_thread_num(), team = omp_get_num_threads();
    float* acc = sums + th * per_thread;
    std::vector<uint32_t>& buf = pair_buffer();
    buf.resize(size_t(xp_words + dp_words));
    // Images [th N / threads, (th + 1) N / threads): a thread's share in order, so that the
    // sums depend on the thread count only.
    for (int64_t n = th * g.N / team; n < (th + 1) * g.N / team; ++n) {
      pack_x(xs + n * x_image, g, buf.data());
      pack_dy(ds + n * dy_image, g, buf.data() + xp_words, with_bias ? acc + 9 * g.Cp * g.O : nullptr);
      accumulate_image(buf.data(), buf.data() + xp_words, g, acc);
    }
    // The partials added in thread order, each output channel's by one thread of the team
    // (the same order whichever thread adds them), into PyTorch's [O, C, 3, 3].
#pragma omp barrier
    for (int64_t o = th * g.O / team; o < (th + 1) * g.O / team; ++o) {
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t t = 0; t < 9; ++t) {
          const int64_t i = (t * g.Cp + c) * g.O + o;
          float v = sums[i];
          for (int k = 1; k < team; ++k) v += sums[k * per_thread + i];
          dw[(o * g.C + c) * 9 + t] = v;
        }
      if (db) {
        float v = sums[9 * g.Cp * g.O + o];
        for (int k = 1; k < team; ++k) v += sums[k * per_thread + 9 * g.Cp * g.O + o];
        db[o] = v;
      }
    }
  }
  return out;
}

}  // namespace mixprec::backend::cpu
