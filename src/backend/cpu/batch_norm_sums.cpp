// backend/cpu/batch_norm_sums.cpp: see batch_norm_sums.h.
#include "backend/cpu/batch_norm_sums.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"

namespace mixprec::backend::cpu::batch_norm_sums {

namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // below: the OpenMP fork costs more

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
  const char* xb = static_cast<const char*>(x.data());
  const char* gb = dy ? static_cast<const char*>(dy->data()) : nullptr;
  const DType xt = x.dtype(), gt = dy ? dy->dtype() : DType::f32;
  const int64_t xs = int64_t(dtype_size(xt)), gs = int64_t(dtype_size(gt));
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
        const float* xv = reinterpret_cast<const float*>(xb + at * xs);
        if (xt != DType::f32) {
          convert_elements(xb + at * xs, xt, xf.data(), DType::f32, l.inner);
          xv = xf.data();
        }
        const float* gv = nullptr;
        if (dy) {
          gv = reinterpret_cast<const float*>(gb + at * gs);
          if (gt != DType::f32) {
            convert_elements(gb + at * gs, gt, gf.data(), DType::f32, l.inner);
            gv = gf.data();
          }
        }
        kernel(acc, acc2, xv, gv, l.inner, o * l.inner, mu, is);
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
// The same sums for a channels-last f32/bf16/f16 tensor: rows of C channels at positions
// p = row. A thread takes a range of channels and reads that part of every row; partial sums
// sit lane-major ([lane][channel]) so that one row adds to one lane of every channel.
template <SumKind K>
void rows_lane_sums(const ChannelLayout& l, const Tensor& x, const Tensor* dy, int64_t numel,
                    const std::vector<double>& mean, const std::vector<double>& invstd, std::vector<Lanes>& sums,
                    std::vector<Lanes>& sums2) {
  const char* xb = static_cast<const char*>(x.data());
  const char* gb = dy ? static_cast<const char*>(dy->data()) : nullptr;
  const DType xt = x.dtype(), gt = dy ? dy->dtype() : DType::f32;
  const int64_t xs = int64_t(dtype_size(xt)), gs = int64_t(dtype_size(gt)), C = l.channels;
  sums.assign(size_t(C), Lanes{});
  sums2.assign(size_t(C), Lanes{});
#pragma omp parallel if (numel > kParallelMin)
  {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t c0 = C * t / threads, c1 = C * (t + 1) / threads, width = c1 - c0;
    if (width > 0) {
      std::vector<float> xf(static_cast<size_t>(width)), gf(static_cast<size_t>(width));
      std::vector<double> a(static_cast<size_t>(kLanes * width), 0.0), a2(static_cast<size_t>(kLanes * width), 0.0);
      std::vector<double> mu(mean.begin() + (mean.empty() ? 0 : c0), mean.empty() ? mean.begin() : mean.begin() + c1);
      std::vector<double> is(invstd.begin() + (invstd.empty() ? 0 : c0), invstd.empty() ? invstd.begin() : invstd.begin() + c1);
      for (int64_t o = 0; o < l.outer; ++o) {
        const int64_t at = o * C + c0;
        convert_elements(xb + at * xs, xt, xf.data(), DType::f32, width);
        if (dy) convert_elements(gb + at * gs, gt, gf.data(), DType::f32, width);
        double* lane = a.data() + (o & (kLanes - 1)) * width;
        double* lane2 = a2.data() + (o & (kLanes - 1)) * width;
        for (int64_t c = 0; c < width; ++c) {
          if constexpr (K == SumKind::values) {
            lane[c] += double(xf[size_t(c)]);
          } else if constexpr (K == SumKind::deviation) {
            const double d = double(xf[size_t(c)]) - mu[size_t(c)];
            lane[c] += d * d;
          } else {
            const double g = double(gf[size_t(c)]);
            lane[c] += g;
            lane2[c] += (g * (double(xf[size_t(c)]) - mu[size_t(c)])) * is[size_t(c)];
          }
        }
      }
      for (int64_t c = 0; c < width; ++c)
        for (int64_t L = 0; L < kLanes; ++L) {
          sums[size_t(c0 + c)][size_t(L)] = a[size_t(L * width + c)];
          sums2[size_t(c0 + c)][size_t(L)] = a2[size_t(L * width + c)];
        }
    }
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
