// backend/cpu/batch_norm.cpp: batch_norm forward and backward (norm.h), run by run: each
// thread widens one run of a channel's values (contiguous: H*W values of one (n, c);
// channels-last: one row of C channels) into a small buffer, computes in double and rounds
// the result once into the output. No full-tensor double copies: they cost most of a
// ResNet step in page faults and serial loops.
//
// Per-channel sums go to 32 lanes in a fixed order (batch_norm_sums.h): contiguous and
// channels-last inputs give bit-identical statistics and gradients on every CPU. f32 and
// 16-bit inputs take batch_norm_sums' kernels; f64 (gradchecks) the generic loops below.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/cpu/batch_norm_sums.h"
#include "backend/cpu/norm.h"
#include "core/convert.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {

namespace {

using namespace batch_norm_sums;

constexpr int64_t kParallelMin = int64_t(1) << 15;  // below: the OpenMP fork costs more

// acc[(p0 + j) mod 32] += v[j] for j = 0 .. len-1, in increasing j.
void add_lanes(Lanes& acc, const double* v, int64_t len, int64_t p0) {
  for (int64_t j = 0; j < len; ++j) acc[size_t((p0 + j) & (kLanes - 1))] += v[j];
}

// len values of a dense buffer from element `at`, widened to T: float for the 16- and
// 32-bit dtypes (exact), double for f64. The arithmetic on them is double either way.
template <typename T>
void load(const Tensor& t, int64_t at, int64_t len, T* out) {
  const auto* base = static_cast<const char*>(t.data()) + at * int64_t(dtype_size(t.dtype()));
  if (std::is_same_v<T, float> && t.dtype() == DType::f32)
    std::memcpy(out, base, size_t(len) * sizeof(float));
  else
    convert_elements(base, t.dtype(), out, std::is_same_v<T, float> ? DType::f32 : DType::f64, len);
}

template <typename T, typename F>
std::vector<Lanes> channel_lane_sums(const ChannelLayout& l, const Tensor& x, const Tensor* dy, int64_t numel, F&& f) {
  std::vector<Lanes> sums(size_t(l.channels), Lanes{});
  if (l.inner > 1) {
#pragma omp parallel if (numel > kParallelMin)
    {
      std::vector<T> xb(static_cast<size_t>(l.inner)), db(dy ? static_cast<size_t>(l.inner) : 0);
      std::vector<double> out(static_cast<size_t>(l.inner));
#pragma omp for schedule(static)
      for (int64_t c = 0; c < l.channels; ++c) {
        Lanes acc{};
        for (int64_t o = 0; o < l.outer; ++o) {
          const int64_t at = (o * l.channels + c) * l.inner;
          load(x, at, l.inner, xb.data());
          if (dy) load(*dy, at, l.inner, db.data());
          f(xb.data(), dy ? db.data() : nullptr, l.inner, c, out.data());
          add_lanes(acc, out.data(), l.inner, o * l.inner);
        }
        sums[size_t(c)] = acc;
      }
    }
    return sums;
  }
#pragma omp parallel if (numel > kParallelMin)
  {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t c0 = l.channels * t / threads, c1 = l.channels * (t + 1) / threads, width = c1 - c0;
    if (width > 0) {
      std::vector<T> xb(static_cast<size_t>(width)), db(dy ? static_cast<size_t>(width) : 0);
      std::vector<double> out(static_cast<size_t>(width));
      for (int64_t o = 0; o < l.outer; ++o) {  // one row: channels c0 .. c1-1 at position p = o
        load(x, o * l.channels + c0, width, xb.data());
        if (dy) load(*dy, o * l.channels + c0, width, db.data());
        for (int64_t c = 0; c < width; ++c) f(xb.data() + c, dy ? db.data() + c : nullptr, 1, c0 + c, out.data() + c);
        const size_t lane = size_t(o & (kLanes - 1));
        for (int64_t c = 0; c < width; ++c) sums[size_t(c0 + c)][lane] += out[size_t(c)];
      }
    }
  }
  return sums;
}

// out = g(x, dy, len, c, y) over every run, in parallel; y rounded into `out`.
// out = f(x, dy) over every element, in parallel, rounded once into `out`. Contiguous input
// goes run by run: run(x, dy, len, c, y) with one channel c; channels-last input goes in
// blocks of rows: row(x, dy, C, y) for one row of all C channels.
template <typename T, typename Run, typename Row>
void map_elements(const ChannelLayout& l, const Tensor& x, const Tensor* dy, Tensor& out, int64_t numel, Run&& run,
                  Row&& row) {
  constexpr int64_t kRowsPerBlock = 16;  // channels-last: convert this many rows per call
  const bool rows = l.inner == 1;
  const int64_t len = rows ? l.channels * kRowsPerBlock : l.inner;
  const int64_t blocks = rows ? (l.outer + kRowsPerBlock - 1) / kRowsPerBlock : l.outer * l.channels;
  const DType wide = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  const char* xb = static_cast<const char*>(x.data());
  const char* gb = dy ? static_cast<const char*>(dy->data()) : nullptr;
  char* ob = static_cast<char*>(out.data());
  const DType xt = x.dtype(), gt = dy ? dy->dtype() : xt, ot = out.dtype();
  const int64_t xs = int64_t(dtype_size(xt)), gs = int64_t(dtype_size(gt)), os = int64_t(dtype_size(ot));
#pragma omp parallel if (numel > kParallelMin)
  {
    std::vector<T> xv(static_cast<size_t>(len)), dv(dy ? static_cast<size_t>(len) : 0);
    std::vector<double> yb(static_cast<size_t>(len));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t at = b * len;
      const int64_t n = rows ? std::min(len, l.outer * l.channels - at) : len;
      convert_elements(xb + at * xs, xt, xv.data(), wide, n);
      if (dy) convert_elements(gb + at * gs, gt, dv.data(), wide, n);
      if (rows) {
        for (int64_t r = 0; r * l.channels < n; ++r)
          row(xv.data() + r * l.channels, dy ? dv.data() + r * l.channels : nullptr, l.channels,
              yb.data() + r * l.channels);
      } else {
        run(xv.data(), dy ? dv.data() : nullptr, n, b % l.channels, yb.data());
      }
      convert_elements(yb.data(), DType::f64, ob + at * os, ot, n);  // rounded once
    }
  }
}

}  // namespace

ChannelLayout channel_layout(const Tensor& x) {
  ChannelLayout l;
  l.channels = x.size(1);
  l.format = x.suggest_memory_format();
  int64_t spatial = 1;
  for (int64_t i = 2; i < x.dim(); ++i) spatial *= x.size(i);
  l.outer = l.format == MemoryFormat::channels_last ? x.size(0) * spatial : x.size(0);
  l.inner = l.format == MemoryFormat::channels_last ? 1 : spatial;
  return l;
}

namespace {

// T: the buffer type values are widened to (float, or double for f64 tensors).
template <typename T>
BatchNormForward forward(const Tensor& x, const std::vector<double>& w, const std::vector<double>& b, bool batch_stats,
                         const Tensor& running_mean, const Tensor& running_var, bool update_running, double momentum,
                         double eps, const BatchNormSync* sync) {
  const ChannelLayout l = channel_layout(x);
  const int64_t m = l.per_channel();  // values per channel
  const int64_t n = x.numel();
  auto stats = std::make_shared<ChannelStats>();
  stats->mean.resize(size_t(l.channels));
  stats->invstd.resize(size_t(l.channels));
  std::vector<double> var(size_t(l.channels));  // biased
  double count = double(std::max<int64_t>(m, 1));
  if (!batch_stats) sync = nullptr;
  if (batch_stats) {
    const bool fast = std::is_same_v<T, float>;  // not f64: the widened values are f32
    std::vector<Lanes> sums, sq, unused;
    if (fast)
      fast_lane_sums<SumKind::values>(l, x, nullptr, n, {}, {}, sums, unused);
    else
      sums = channel_lane_sums<T>(l, x, nullptr, n, [](const auto* v, const auto*, int64_t len, int64_t, double* out) {
        std::copy(v, v + len, out);
      });
    // --sync-bn: the sums and the count over every process, then the same arithmetic.
    std::vector<double> total(size_t(l.channels) + 1);
    for (int64_t c = 0; c < l.channels; ++c) total[size_t(c)] = combine(sums[size_t(c)]);
    total.back() = count;
    if (sync) sync->sum_statistics(total);
    count = total.back();
    for (int64_t c = 0; c < l.channels; ++c) stats->mean[size_t(c)] = total[size_t(c)] / count;
    const auto& mean = stats->mean;  // two passes: no cancellation when |mean| >> std
    if (fast)
      fast_lane_sums<SumKind::deviation>(l, x, nullptr, n, mean, {}, sq, unused);
    else
      sq = channel_lane_sums<T>(l, x, nullptr, n, [&mean](const auto* v, const auto*, int64_t len, int64_t c, double* out) {
        const double mu = mean[size_t(c)];
        for (int64_t j = 0; j < len; ++j) out[j] = (v[j] - mu) * (v[j] - mu);
      });
    for (int64_t c = 0; c < l.channels; ++c) var[size_t(c)] = combine(sq[size_t(c)]);
    if (sync) sync->sum_statistics(var);
    for (double& v : var) v /= count;
  } else {
    stats->mean = running_mean.to_vector_f64();
    var = running_var.to_vector_f64();
  }
  stats->count = count;
  for (int64_t c = 0; c < l.channels; ++c) stats->invstd[size_t(c)] = 1.0 / std::sqrt(var[size_t(c)] + eps);
  if (update_running) {
    // PyTorch's rule: the running variance tracks the unbiased estimate.
    std::vector<double> rm = running_mean.to_vector_f64(), rv = running_var.to_vector_f64();
    const double unbias = count / (count - 1.0);
    for (int64_t c = 0; c < l.channels; ++c) {
      rm[size_t(c)] = (1.0 - momentum) * rm[size_t(c)] + momentum * stats->mean[size_t(c)];
      rv[size_t(c)] = (1.0 - momentum) * rv[size_t(c)] + momentum * var[size_t(c)] * unbias;
    }
    Tensor rm_handle = running_mean, rv_handle = running_var;  // handles share the buffers
    rm_handle.copy_(Tensor::from_vector_f64(rm, running_mean.shape(), DType::f64));
    rv_handle.copy_(Tensor::from_vector_f64(rv, running_var.shape(), DType::f64));
  }
  std::vector<double> scale(size_t(l.channels));
  for (int64_t c = 0; c < l.channels; ++c) scale[size_t(c)] = stats->invstd[size_t(c)] * w[size_t(c)];
  Tensor dst = Tensor::empty(x.shape(), x.dtype(), l.format);
  const auto& mean = stats->mean;
  map_elements<T>(
      l, x, nullptr, dst, n,
      [&](const auto* v, const auto*, int64_t len, int64_t c, double* y) {
        const double mu = mean[size_t(c)], s = scale[size_t(c)], shift = b[size_t(c)];
        for (int64_t j = 0; j < len; ++j) y[j] = (v[j] - mu) * s + shift;
      },
      [&](const auto* v, const auto*, int64_t C, double* y) {
        for (int64_t c = 0; c < C; ++c) y[c] = (v[c] - mean[size_t(c)]) * scale[size_t(c)] + b[size_t(c)];
      });
  return BatchNormForward{dst, stats};
}

template <typename T>
BatchNormGrads backward(const Tensor& x, const Tensor& dy, const ChannelStats& stats, const std::vector<double>& w,
                        bool batch_stats, bool need_x, const BatchNormSync* sync) {
  const ChannelLayout l = channel_layout(x);
  double m = double(l.per_channel());
  const int64_t n = x.numel();
  const auto& mean = stats.mean;
  const auto& invstd = stats.invstd;
  std::vector<Lanes> dy_sums, dy_xhat_sums;
  if (std::is_same_v<T, float>) {  // both sums in one pass
    fast_lane_sums<SumKind::backward>(l, x, &dy, n, mean, invstd, dy_sums, dy_xhat_sums);
  } else {
    dy_sums = channel_lane_sums<T>(l, x, &dy, n, [](const auto*, const auto* g, int64_t len, int64_t, double* out) {
      std::copy(g, g + len, out);
    });
    dy_xhat_sums = channel_lane_sums<T>(l, x, &dy, n, [&](const auto* v, const auto* g, int64_t len, int64_t c, double* out) {
      const double mu = mean[size_t(c)], is = invstd[size_t(c)];
      for (int64_t j = 0; j < len; ++j) out[j] = g[j] * (v[j] - mu) * is;
    });
  }
  std::vector<double> sum_dy(size_t(l.channels)), sum_dy_xhat(size_t(l.channels));
  for (int64_t c = 0; c < l.channels; ++c) {
    sum_dy[size_t(c)] = combine(dy_sums[size_t(c)]);
    sum_dy_xhat[size_t(c)] = combine(dy_xhat_sums[size_t(c)]);
  }
  Tensor dx;
  if (need_x) {
    dx = Tensor::empty(x.shape(), x.dtype(), l.format);
    if (batch_stats) {
      // The batch mean and variance depend on x too:
      // dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
      // --sync-bn: the means are over every process's samples (weighted as the processes'
      // gradients are); sum_dy and sum_dy_xhat themselves stay this process's (d bias, d weight).
      const size_t C = size_t(l.channels);
      std::vector<double> sums(2 * C);
      std::copy(sum_dy.begin(), sum_dy.end(), sums.begin());
      std::copy(sum_dy_xhat.begin(), sum_dy_xhat.end(), sums.begin() + std::ptrdiff_t(C));
      if (sync) {
        sync->sum_gradients(sums);
        m = stats.count;
      }
      std::vector<double> a(C), bb(C), ws(C);
      for (size_t k = 0; k < C; ++k) {
        a[k] = sums[k] / m;
        bb[k] = sums[C + k] / m;
        ws[k] = w[k] * invstd[k];
      }
      map_elements<T>(
          l, x, &dy, dx, n,
          [&](const auto* v, const auto* g, int64_t len, int64_t c, double* out) {
            const size_t k = size_t(c);
            for (int64_t j = 0; j < len; ++j) out[j] = ws[k] * (g[j] - a[k] - (v[j] - mean[k]) * invstd[k] * bb[k]);
          },
          [&](const auto* v, const auto* g, int64_t C, double* out) {
            for (int64_t c = 0; c < C; ++c) {
              const size_t k = size_t(c);
              out[c] = ws[k] * (g[c] - a[k] - (v[c] - mean[k]) * invstd[k] * bb[k]);
            }
          });
    } else {
      std::vector<double> ws(size_t(l.channels));
      for (size_t k = 0; k < size_t(l.channels); ++k) ws[k] = w[k] * invstd[k];
      map_elements<T>(
          l, x, &dy, dx, n,
          [&](const auto*, const auto* g, int64_t len, int64_t c, double* out) {
            for (int64_t j = 0; j < len; ++j) out[j] = ws[size_t(c)] * g[j];
          },
          [&](const auto*, const auto* g, int64_t C, double* out) {
            for (int64_t c = 0; c < C; ++c) out[c] = ws[size_t(c)] * g[c];
          });
    }
  }
  return BatchNormGrads{dx, std::move(sum_dy), std::move(sum_dy_xhat)};
}

}  // namespace

BatchNormForward batch_norm_forward(const Tensor& x, const std::vector<double>& w, const std::vector<double>& b,
                                    bool batch_stats, const Tensor& running_mean, const Tensor& running_var,
                                    bool update_running, double momentum, double eps, const BatchNormSync* sync) {
  MIXPREC_CHECK(x.is_dense(), "batch_norm: needs a dense tensor, got " + x.str());
  if (x.dtype() == DType::f64)
    return forward<double>(x, w, b, batch_stats, running_mean, running_var, update_running, momentum, eps, sync);
  return forward<float>(x, w, b, batch_stats, running_mean, running_var, update_running, momentum, eps, sync);
}

BatchNormGrads batch_norm_backward(const Tensor& x, const Tensor& diff_dst, const ChannelStats& stats,
                                   const std::vector<double>& w, bool batch_stats, bool need_x,
                                   const BatchNormSync* sync) {
  MIXPREC_CHECK(x.is_dense(), "batch_norm: needs a dense tensor, got " + x.str());
  const Tensor dy = diff_dst.to_memory_format(channel_layout(x).format);
  if (!batch_stats) sync = nullptr;
  if (x.dtype() == DType::f64 || dy.dtype() == DType::f64)
    return backward<double>(x, dy, stats, w, batch_stats, need_x, sync);
  return backward<float>(x, dy, stats, w, batch_stats, need_x, sync);
}

}  // namespace mixprec::backend::cpu
