// backend/cpu/batch_norm_sums.cpp: see batch_norm_sums.h.
#include "backend/cpu/batch_norm_sums.h"
#include "backend/cpu/tail_mask.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu::batch_norm_sums {

namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // below: the OpenMP fork costs more

// A dense f32/bf16/f16 tensor's elements as f32 (exact): f32 is read in place, the 16-bit
// dtypes are widened into the caller's scratch buffer.
class F32Reader {
 public:
  explicit F32Reader(const Tensor& t)
      : base_(static_cast<const char*>(t.data())), dtype_(t.dtype()), size_(int64_t(dtype_size(t.dtype()))) {}
  // Elements at .. at+n-1; scratch holds at least n floats.
  const float* read(int64_t at, int64_t n, float* scratch) const {
    if (dtype_ == DType::f32) return reinterpret_cast<const float*>(base_ + at * size_);
    convert_elements(base_ + at * size_, dtype_, scratch, DType::f32, n);
    return scratch;
  }

 private:
  const char* base_;
  DType dtype_;
  int64_t size_;
};

template <SumKind K>
inline void add_one(Lanes& acc, Lanes& acc2, int64_t lane, float xv, float gv, double mu, double is) {
  if constexpr (K == SumKind::values) {
    acc[size_t(lane)] += double(xv);
  } else if constexpr (K == SumKind::deviation) {
    const double d = double(xv) - mu;
    acc[size_t(lane)] += d * d;
  } else {
    const double g = double(gv);
    acc[size_t(lane)] += g;
    acc2[size_t(lane)] += (g * (double(xv) - mu)) * is;
  }
}

template <SumKind K>
void lane_sums_scalar(Lanes& acc, Lanes& acc2, const float* x, const float* g, int64_t len, int64_t p0, double mu,
                      double is) {
  for (int64_t j = 0; j < len; ++j) add_one<K>(acc, acc2, (p0 + j) & (kLanes - 1), x[j], g ? g[j] : 0.0f, mu, is);
}

// GCC 12 builds _mm512_cvtps_pd on _mm512_undefined_pd(), which -Wmaybe-uninitialized
// reports at each inlined use: a known false positive, silenced for this kernel only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <SumKind K>
__attribute__((target("avx512f"))) void lane_sums_avx512(Lanes& acc, Lanes& acc2, const float* x, const float* g,
                                                         int64_t len, int64_t p0, double mu, double is) {
  int64_t j = 0;
  for (; j < len && ((p0 + j) & (kLanes - 1)) != 0; ++j)
    add_one<K>(acc, acc2, (p0 + j) & (kLanes - 1), x[j], g ? g[j] : 0.0f, mu, is);
  if (j + kLanes <= len) {
    __m512d a[4], b[4];
    for (int k = 0; k < 4; ++k) {
      a[k] = _mm512_loadu_pd(acc.data() + 8 * k);
      b[k] = _mm512_loadu_pd(acc2.data() + 8 * k);
    }
    const __m512d vmu = _mm512_set1_pd(mu), vis = _mm512_set1_pd(is);
    for (; j + kLanes <= len; j += kLanes)
      for (int k = 0; k < 4; ++k) {
        const __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 8 * k));
        if constexpr (K == SumKind::values) {
          a[k] = _mm512_add_pd(a[k], xv);
        } else if constexpr (K == SumKind::deviation) {
          const __m512d d = _mm512_sub_pd(xv, vmu);
          a[k] = _mm512_add_pd(a[k], _mm512_mul_pd(d, d));
        } else {
          const __m512d gv = _mm512_cvtps_pd(_mm256_loadu_ps(g + j + 8 * k));
          a[k] = _mm512_add_pd(a[k], gv);
          b[k] = _mm512_add_pd(b[k], _mm512_mul_pd(_mm512_mul_pd(gv, _mm512_sub_pd(xv, vmu)), vis));
        }
      }
    for (int k = 0; k < 4; ++k) {
      _mm512_storeu_pd(acc.data() + 8 * k, a[k]);
      _mm512_storeu_pd(acc2.data() + 8 * k, b[k]);
    }
  }
  for (; j < len; ++j) add_one<K>(acc, acc2, (p0 + j) & (kLanes - 1), x[j], g ? g[j] : 0.0f, mu, is);
}
#pragma GCC diagnostic pop

// Per channel of a contiguous f32/bf16/f16 tensor: the lane sums of kind K (and acc2 for
// backward), a thread taking whole channels, each run widened to f32 once.
template <SumKind K>
void contiguous_lane_sums(const ChannelLayout& l, const Tensor& x, const Tensor* dy, int64_t numel,
                          const std::vector<double>& mean, const std::vector<double>& invstd, std::vector<Lanes>& sums,
                          std::vector<Lanes>& sums2) {
  const auto kernel = cpu_features().avx512f ? lane_sums_avx512<K> : lane_sums_scalar<K>;
  const F32Reader xr(x);
  const std::optional<F32Reader> gr = dy ? std::optional<F32Reader>(*dy) : std::nullopt;
  sums.assign(size_t(l.channels), Lanes{});
  sums2.assign(size_t(l.channels), Lanes{});
#pragma omp parallel if (numel > kParallelMin)
  {
    std::vector<float> xf(static_cast<size_t>(l.inner)), gf(dy ? static_cast<size_t>(l.inner) : 0);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < l.channels; ++c) {
      Lanes acc{}, acc2{};
      const double mu = mean.empty() ? 0.0 : mean[size_t(c)], is = invstd.empty() ? 0.0 : invstd[size_t(c)];
      for (int64_t o = 0; o < l.outer; ++o) {
        const int64_t at = (o * l.channels + c) * l.inner;
        const float* gv = gr ? gr->read(at, l.inner, gf.data()) : nullptr;
        kernel(acc, acc2, xr.read(at, l.inner, xf.data()), gv, l.inner, o * l.inner, mu, is);
      }
      sums[size_t(c)] = acc;
      sums2[size_t(c)] = acc2;
    }
  }
}



// Per channel, the eight lane sums of f over its values. f(x, dy, len, c, out) writes the
// len summands of a run (x and dy: its values, dy null when only x is read). For
// contiguous input a thread takes whole channels; for channels-last a thread takes a range
// of channels and reads that part of every row.
// One row of C channel values (f32) added to lane row `lane` (C doubles) of acc and acc2.
template <SumKind K>
void row_scalar(double* lane, double* lane2, const float* x, const float* g, int64_t C, const double* mu,
                const double* is) {
  for (int64_t c = 0; c < C; ++c) {
    if constexpr (K == SumKind::values) {
      lane[c] += double(x[c]);
    } else if constexpr (K == SumKind::deviation) {
      const double d = double(x[c]) - mu[c];
      lane[c] += d * d;
    } else {
      const double gv = double(g[c]);
      lane[c] += gv;
      lane2[c] += (gv * (double(x[c]) - mu[c])) * is[c];
    }
  }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// row_scalar over 8 channels at a time (the same roundings: no FMA); masked tail.
template <SumKind K>
__attribute__((target("avx512f"))) void row_avx512(double* lane, double* lane2, const float* x, const float* g,
                                                   int64_t C, const double* mu, const double* is) {
  for (int64_t c = 0; c < C; c += 8) {
    const __mmask8 m = lanes8(c, C);
    const __m512d xv = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(__mmask16(m), x + c)));
    __m512d a = _mm512_maskz_loadu_pd(m, lane + c);
    if constexpr (K == SumKind::values) {
      a = _mm512_add_pd(a, xv);
    } else if constexpr (K == SumKind::deviation) {
      const __m512d d = _mm512_sub_pd(xv, _mm512_maskz_loadu_pd(m, mu + c));
      a = _mm512_add_pd(a, _mm512_mul_pd(d, d));
    } else {
      const __m512d gv = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(__mmask16(m), g + c)));
      a = _mm512_add_pd(a, gv);
      const __m512d t = _mm512_mul_pd(_mm512_mul_pd(gv, _mm512_sub_pd(xv, _mm512_maskz_loadu_pd(m, mu + c))),
                                      _mm512_maskz_loadu_pd(m, is + c));
      _mm512_mask_storeu_pd(lane2 + c, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, lane2 + c), t));
    }
    _mm512_mask_storeu_pd(lane + c, m, a);
  }
}
#pragma GCC diagnostic pop

// The same sums for a channels-last f32/bf16/f16 tensor: rows of C channels at positions
// p = row, so row o adds to lane o mod 32 of every channel. Threads split the 32 lanes (each
// lane is summed by one thread, in increasing row order, as the serial code would) and read
// their rows in blocks, widened to f32 a block at a time.
template <SumKind K>
void rows_lane_sums(const ChannelLayout& l, const Tensor& x, const Tensor* dy, int64_t numel,
                    const std::vector<double>& mean, const std::vector<double>& invstd, std::vector<Lanes>& sums,
                    std::vector<Lanes>& sums2) {
  const auto row = cpu_features().avx512f ? row_avx512<K> : row_scalar<K>;
  const F32Reader xr(x);
  const std::optional<F32Reader> gr = dy ? std::optional<F32Reader>(*dy) : std::nullopt;
  const int64_t C = l.channels;
  std::vector<double> a(size_t(kLanes * C), 0.0), a2(size_t(kLanes * C), 0.0);  // [lane][channel]
  const std::vector<double> mu = mean.empty() ? std::vector<double>(size_t(C), 0.0) : mean;
  const std::vector<double> is = invstd.empty() ? std::vector<double>(size_t(C), 0.0) : invstd;
#pragma omp parallel if (numel > kParallelMin)
  {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t l0 = kLanes * t / threads, l1 = kLanes * (t + 1) / threads;
    std::vector<float> xf(size_t((l1 - l0) * C)), gf(dy ? size_t((l1 - l0) * C) : 0);
    for (int64_t base = 0; base < l.outer && l1 > l0; base += kLanes) {
      const int64_t first = base + l0, rows = std::min(base + l1, l.outer) - first;
      if (rows <= 0) break;
      const float* xv = xr.read(first * C, rows * C, xf.data());
      const float* gv = gr ? gr->read(first * C, rows * C, gf.data()) : nullptr;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t lane = l0 + r;
        row(a.data() + lane * C, a2.data() + lane * C, xv + r * C, gv ? gv + r * C : nullptr, C, mu.data(), is.data());
      }
    }
  }
  sums.assign(size_t(C), Lanes{});
  sums2.assign(size_t(C), Lanes{});
  for (int64_t c = 0; c < C; ++c)
    for (int64_t L = 0; L < kLanes; ++L) {
      sums[size_t(c)][size_t(L)] = a[size_t(L * C + c)];
      sums2[size_t(c)][size_t(L)] = a2[size_t(L * C + c)];
    }
}

}  // namespace

double combine(const Lanes& a) {  // a fixed pairwise tree
  double level[kLanes];
  std::copy(a.begin(), a.end(), level);
  for (int64_t width = kLanes / 2; width >= 1; width /= 2)
    for (int64_t i = 0; i < width; ++i) level[i] = level[2 * i] + level[2 * i + 1];
  return level[0];
}

template <SumKind K>
void fast_lane_sums(const ChannelLayout& l, const Tensor& x, const Tensor* dy, int64_t numel,
                    const std::vector<double>& mean, const std::vector<double>& invstd, std::vector<Lanes>& sums,
                    std::vector<Lanes>& sums2) {
  if (l.inner > 1)
    contiguous_lane_sums<K>(l, x, dy, numel, mean, invstd, sums, sums2);
  else
    rows_lane_sums<K>(l, x, dy, numel, mean, invstd, sums, sums2);
}

template void fast_lane_sums<SumKind::values>(const ChannelLayout&, const Tensor&, const Tensor*, int64_t,
                                               const std::vector<double>&, const std::vector<double>&,
                                               std::vector<Lanes>&, std::vector<Lanes>&);
template void fast_lane_sums<SumKind::deviation>(const ChannelLayout&, const Tensor&, const Tensor*, int64_t,
                                                  const std::vector<double>&, const std::vector<double>&,
                                                  std::vector<Lanes>&, std::vector<Lanes>&);
template void fast_lane_sums<SumKind::backward>(const ChannelLayout&, const Tensor&, const Tensor*, int64_t,
                                                 const std::vector<double>&, const std::vector<double>&,
                                                 std::vector<Lanes>&, std::vector<Lanes>&);

}  // namespace mixprec::backend::cpu::batch_norm_sums
