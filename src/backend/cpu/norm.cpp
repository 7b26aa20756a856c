// backend/cpu/norm.cpp: see norm.h. layer_norm runs row by row (each thread converts its
// own rows to double and back, backend/cpu/layer_norm_rows.h): no full-tensor double
// copies, which cost ~10 ms per call at [4096, 256] in page faults and conversions.
#include "backend/cpu/norm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/layer_norm_rows.h"
#include "core/convert.h"
#include "mixprec/status.h"

namespace mixprec::backend::cpu {

namespace {

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = int64_t(1) << 15;

// A dense tensor's values in buffer order.
std::vector<double> load_dense(const Tensor& t) {
  MIXPREC_CHECK(t.is_dense(), "batch_norm: load_dense needs a dense tensor, got " + t.str());
  std::vector<double> v(size_t(t.numel()));
  convert_elements(t.data(), t.dtype(), v.data(), DType::f64, t.numel());
  return v;
}

// Values in the buffer order of `format` stored as dtype.
Tensor store_dense(const std::vector<double>& v, const Shape& shape, DType dtype,
                   MemoryFormat format) {
  Tensor out = Tensor::empty(shape, dtype, format);
  convert_elements(v.data(), DType::f64, out.data(), dtype, out.numel());
  return out;
}


// Per-channel sums of f(i, c) over each channel's elements, always added in (o, j) order,
// so contiguous and channels-last inputs give bit-identical statistics whatever the
// thread count. Walks memory linearly in both layouts: by channel when a channel's values
// form runs (contiguous), else row by row (channels-last, serial).
template <typename F>
std::vector<double> channel_sums(const ChannelLayout& l, int64_t numel, F&& f) {
  std::vector<double> s(size_t(l.channels), 0.0);
  if (l.inner > 1) {
#pragma omp parallel for if (numel > kParallelMin)
    for (int64_t c = 0; c < l.channels; ++c) {
      double acc = 0.0;
      for (int64_t o = 0; o < l.outer; ++o) {
        const int64_t base = (o * l.channels + c) * l.inner;
        for (int64_t j = 0; j < l.inner; ++j) acc += f(size_t(base + j), c);
      }
      s[size_t(c)] = acc;
    }
  } else {
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t c = 0; c < l.channels; ++c) s[size_t(c)] += f(size_t(o * l.channels + c), c);
  }
  return s;
}

// Calls f(i, c) once for every element, in parallel over the outer index.
template <typename F>
void for_each_element(const ChannelLayout& l, int64_t numel, F&& f) {
#pragma omp parallel for if (numel > kParallelMin)
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c) {
      const int64_t base = (o * l.channels + c) * l.inner;
      for (int64_t j = 0; j < l.inner; ++j) f(size_t(base + j), c);
    }
}

}  // namespace

Tensor layer_norm_forward(const Tensor& x, int64_t d, const std::vector<double>& w,
                          const std::vector<double>& b, double eps, LayerNormStats& st) {
  const int64_t rows = d > 0 ? x.numel() / d : 0;
  LayerNormStats* stats = &st;
  stats->mean.resize(size_t(rows));
  stats->rstd.resize(size_t(rows));
  Tensor dst = Tensor::empty(x.shape(), x.dtype());
  const DType dt = x.dtype();
#pragma omp parallel if (rows * d > kParallelMin)
  {
    layer_norm_rows::Scratch scratch;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      layer_norm_rows::forward_row(x.data(), dt, r, d, w.data(), b.data(), eps, dst.data(),
                                   stats->mean[size_t(r)], stats->rstd[size_t(r)], scratch);
  }
  return dst;
}

LayerNormGrads layer_norm_backward(const Tensor& x, const Tensor& diff_dst, int64_t d,
                                   const std::vector<double>& w, const LayerNormStats& st,
                                   bool need_x, bool need_wb) {
  const int64_t rows = d > 0 ? x.numel() / d : 0;
  const LayerNormStats* stats = &st;
  const Tensor dy_t = diff_dst.contiguous();
  const DType dt = x.dtype(), gdt = dy_t.dtype();
  std::vector<Tensor> g(1);
  if (need_x) g[0] = Tensor::empty(x.shape(), dt);
  // Weight gradients: one partial sum per thread over its static block of
  // rows, added in thread order, so results do not depend on timing.
  const int threads = rows * d > kParallelMin ? omp_get_max_threads() : 1;
  std::vector<std::vector<double>> dw_part(static_cast<size_t>(threads)), db_part(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    layer_norm_rows::Scratch scratch;
    std::vector<double> dw_t(size_t(d), 0.0), db_t(size_t(d), 0.0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      layer_norm_rows::backward_row(
          x.data(), dt, dy_t.data(), gdt, r, d, w.data(), stats->mean[size_t(r)],
          stats->rstd[size_t(r)], need_x ? g[0].data() : nullptr,
          need_wb ? dw_t.data() : nullptr,
          need_wb ? db_t.data() : nullptr, scratch);
    dw_part[size_t(tid)] = std::move(dw_t);
    db_part[size_t(tid)] = std::move(db_t);
  }
  std::vector<double> dw(size_t(d), 0.0), db(size_t(d), 0.0);
  for (int t = 0; t < threads; ++t)
    for (int64_t j = 0; j < d; ++j) {
      if (!dw_part[size_t(t)].empty()) dw[size_t(j)] += dw_part[size_t(t)][size_t(j)];
      if (!db_part[size_t(t)].empty()) db[size_t(j)] += db_part[size_t(t)][size_t(j)];
    }
  return LayerNormGrads{need_x ? g[0] : Tensor(), std::move(dw), std::move(db)};
}

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

BatchNormForward batch_norm_forward(const Tensor& x, const std::vector<double>& w,
                                    const std::vector<double>& b, bool batch_stats,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    bool update_running, double momentum, double eps) {
  const ChannelLayout l = channel_layout(x);
  const int64_t m = l.per_channel();  // values per channel
  const std::vector<double> xv = load_dense(x);
  auto stats = std::make_shared<ChannelStats>();
  stats->mean.resize(size_t(l.channels));
  stats->invstd.resize(size_t(l.channels));
  std::vector<double> var(size_t(l.channels));  // biased
  if (batch_stats) {
    const int64_t n = x.numel();
    const double count = double(std::max<int64_t>(m, 1));
    stats->mean = channel_sums(l, n, [&](size_t i, int64_t) { return xv[i]; });
    for (double& v : stats->mean) v /= count;
    const auto& mean = stats->mean;  // two passes: no cancellation when |mean| >> std
    var = channel_sums(l, n, [&](size_t i, int64_t c) {
      const double dv = xv[i] - mean[size_t(c)];
      return dv * dv;
    });
    for (double& v : var) v /= count;
  } else {
    stats->mean = running_mean.to_vector_f64();
    var = running_var.to_vector_f64();
  }
  for (int64_t c = 0; c < l.channels; ++c)
    stats->invstd[size_t(c)] = 1.0 / std::sqrt(var[size_t(c)] + eps);
  if (update_running) {
    // PyTorch's rule: the running variance tracks the unbiased estimate.
    std::vector<double> rm = running_mean.to_vector_f64(), rv = running_var.to_vector_f64();
    const double unbias = double(m) / double(m - 1);
    for (int64_t c = 0; c < l.channels; ++c) {
      rm[size_t(c)] = (1.0 - momentum) * rm[size_t(c)] + momentum * stats->mean[size_t(c)];
      rv[size_t(c)] = (1.0 - momentum) * rv[size_t(c)] + momentum * var[size_t(c)] * unbias;
    }
    Tensor rm_handle = running_mean, rv_handle = running_var;  // handles share the buffers
    rm_handle.copy_(Tensor::from_vector_f64(rm, running_mean.shape(), DType::f64));
    rv_handle.copy_(Tensor::from_vector_f64(rv, running_var.shape(), DType::f64));
  }
  std::vector<double> y(xv.size());
  std::vector<double> scale(size_t(l.channels));
  for (int64_t c = 0; c < l.channels; ++c)
    scale[size_t(c)] = stats->invstd[size_t(c)] * w[size_t(c)];
  for_each_element(l, x.numel(), [&](size_t i, int64_t c) {
    y[i] = (xv[i] - stats->mean[size_t(c)]) * scale[size_t(c)] + b[size_t(c)];
  });
  Tensor dst = store_dense(y, x.shape(), x.dtype(), l.format);
  return BatchNormForward{dst, stats};
}

BatchNormGrads batch_norm_backward(const Tensor& x, const Tensor& diff_dst,
                                   const ChannelStats& st, const std::vector<double>& w,
                                   bool batch_stats, bool need_x) {
  const ChannelLayout l = channel_layout(x);
  const ChannelStats* stats = &st;
  const std::vector<double> dy = load_dense(diff_dst.to_memory_format(l.format));
  const std::vector<double> xv = load_dense(x);
  const double m = double(l.per_channel());
  const int64_t n = x.numel();
  const auto& mean = stats->mean;
  const auto& invstd = stats->invstd;
  const std::vector<double> sum_dy =
      channel_sums(l, n, [&](size_t i, int64_t) { return dy[i]; });
  const std::vector<double> sum_dy_xhat =
      channel_sums(l, n, [&](size_t i, int64_t c) {
        return dy[i] * (xv[i] - mean[size_t(c)]) * invstd[size_t(c)];
      });
  std::vector<double> dx(need_x ? xv.size() : 0);
  if (need_x && batch_stats) {
    // The batch mean and variance depend on x too:
    // dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
    for_each_element(l, n, [&](size_t i, int64_t c) {
      const size_t k = size_t(c);
      const double xhat = (xv[i] - mean[k]) * invstd[k];
      dx[i] = w[k] * invstd[k] * (dy[i] - sum_dy[k] / m - xhat * sum_dy_xhat[k] / m);
    });
  } else if (need_x) {
    for_each_element(l, n, [&](size_t i, int64_t c) {
      dx[i] = w[size_t(c)] * invstd[size_t(c)] * dy[i];
    });
  }
  std::vector<Tensor> g(1);
  if (need_x) g[0] = store_dense(dx, x.shape(), x.dtype(), l.format);
  return BatchNormGrads{need_x ? g[0] : Tensor(), sum_dy, sum_dy_xhat};
}

}  // namespace mixprec::backend::cpu
