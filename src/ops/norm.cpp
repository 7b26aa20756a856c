// norm.cpp: layer_norm and batch_norm (fp32 policy under autocast), forward and backward.
// The kernels are plain loops that accumulate in double whatever the storage dtype, so
// statistics are at least as precise as f32 and f64 gradchecks are exact to roundoff;
// the result is rounded once to the output dtype.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "autograd/node.h"
#include "core/convert.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops_extra.h"
#include "mixprec/status.h"
#include "ops/layer_norm_rows.h"

namespace mixprec {

namespace {

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = int64_t(1) << 15;

// A dense tensor's values in buffer order.
std::vector<double> load_dense(const Tensor& t) {
  MIXPREC_CHECK(t.is_dense(), "norm: load_dense needs a dense tensor, got " + t.str());
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

// weight/bias as n doubles, or n copies of `fill` when undefined (no affine).
std::vector<double> affine_values(const Tensor& t, int64_t n, double fill) {
  return t.defined() ? t.to_vector_f64() : std::vector<double>(size_t(n), fill);
}

void check_eps(const char* op, double eps) {
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw Error(Status::invalid_argument(std::string(op) + ": eps must be finite and >= 0, got " +
                                         std::to_string(eps)));
}

void check_floating(const char* op, const char* field, const Tensor& t) {
  if (t.defined() && !is_floating(t.dtype()))
    throw Error(Status::invalid_argument(std::string(op) + ": " + field +
                                         " must be a floating tensor, got " + t.str()));
}

// ---------------------------------------------------------------------------------------
// layer_norm

void check_layer_norm(const Tensor& src, const Shape& ns, const Tensor& weight, const Tensor& bias,
                      double eps) {
  check_floating("layer_norm", "src", src);
  check_floating("layer_norm", "weight", weight);
  check_floating("layer_norm", "bias", bias);
  check_eps("layer_norm", eps);
  const int64_t k = int64_t(ns.size());
  bool fits = k >= 1 && k <= src.dim();
  for (int64_t i = 0; fits && i < k; ++i) fits = src.size(src.dim() - k + i) == ns[size_t(i)];
  if (!fits)
    throw Error(Status::invalid_argument("layer_norm: normalized_shape " + shape_str(ns) +
                                         " does not match the trailing dims of src " +
                                         shape_str(src.shape()) + " (expected src [..., " +
                                         shape_str(ns).substr(1) + ")"));
  for (const auto* p : {&weight, &bias})
    if (p->defined() && p->shape() != ns)
      throw Error(Status::invalid_argument(
          std::string("layer_norm: ") + (p == &weight ? "weight " : "bias ") +
          shape_str(p->shape()) + " does not match normalized_shape " + shape_str(ns)));
}

struct RowStats {
  std::vector<double> mean, rstd;  // per row: mean and 1 / sqrt(biased var + eps)
};

}  // namespace

// Row by row (each thread converts its own rows to double and back): no full-tensor
// double copies, which cost ~10 ms per call at [4096, 256] in page faults and conversions.
Tensor layer_norm(const Tensor& src_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::layer_norm, {src_in, weight_in, bias_in});
  const Tensor &src = in[0], &weight = in[1], &bias = in[2];
  check_layer_norm(src, normalized_shape, weight, bias, eps);
  const int64_t d = shape_numel(normalized_shape);
  const int64_t rows = d > 0 ? src.numel() / d : 0;
  const Tensor x = src.detach().contiguous();  // rows of d contiguous values
  const std::vector<double> w = affine_values(weight, d, 1.0), b = affine_values(bias, d, 0.0);
  auto stats = std::make_shared<RowStats>();
  stats->mean.resize(size_t(rows));
  stats->rstd.resize(size_t(rows));
  Tensor dst = Tensor::empty(src.shape(), src.dtype());
  const DType dt = x.dtype();
#pragma omp parallel if (rows * d > kParallelMin)
  {
    layer_norm_rows::Scratch scratch;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      layer_norm_rows::forward_row(x.data(), dt, r, d, w.data(), b.data(), eps, dst.data(),
                                   stats->mean[size_t(r)], stats->rstd[size_t(r)], scratch);
  }
  if (any_requires_grad({&src, &weight, &bias})) {
    const bool need_x = src.requires_grad();
    const bool need_w = weight.defined() && weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const DType w_dtype = weight.defined() ? weight.dtype() : src.dtype();
    const DType b_dtype = bias.defined() ? bias.dtype() : src.dtype();
    record_op(dst, "layer_norm", {&src, &weight, &bias},
              [x, stats, w, d, rows, normalized_shape, need_x, need_w, need_b, w_dtype,
               b_dtype](const Tensor& diff_dst) {
                const Tensor dy_t = diff_dst.contiguous();
                const DType dt = x.dtype(), gdt = dy_t.dtype();
                std::vector<Tensor> g(3);
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
                        need_w || need_b ? dw_t.data() : nullptr,
                        need_w || need_b ? db_t.data() : nullptr, scratch);
                  dw_part[size_t(tid)] = std::move(dw_t);
                  db_part[size_t(tid)] = std::move(db_t);
                }
                std::vector<double> dw(size_t(d), 0.0), db(size_t(d), 0.0);
                for (int t = 0; t < threads; ++t)
                  for (int64_t j = 0; j < d; ++j) {
                    if (!dw_part[size_t(t)].empty()) dw[size_t(j)] += dw_part[size_t(t)][size_t(j)];
                    if (!db_part[size_t(t)].empty()) db[size_t(j)] += db_part[size_t(t)][size_t(j)];
                  }
                if (need_w) g[1] = Tensor::from_vector_f64(dw, normalized_shape, w_dtype);
                if (need_b) g[2] = Tensor::from_vector_f64(db, normalized_shape, b_dtype);
                return g;
              });
  }
  return dst;
}

// ---------------------------------------------------------------------------------------
// batch_norm

namespace {

// Element (o, c, j) of a dense [N, C, ...] buffer sits at (o * channels + c) * inner + j:
// contiguous has outer = N, inner = H*W; channels-last has outer = N*H*W, inner = 1.
struct ChannelLayout {
  int64_t outer = 0, channels = 0, inner = 0;
  MemoryFormat format = MemoryFormat::contiguous;
  int64_t per_channel() const { return outer * inner; }
};

ChannelLayout layout_of(const Tensor& x) {
  ChannelLayout l;
  l.channels = x.size(1);
  l.format = x.suggest_memory_format();
  int64_t spatial = 1;
  for (int64_t i = 2; i < x.dim(); ++i) spatial *= x.size(i);
  l.outer = l.format == MemoryFormat::channels_last ? x.size(0) * spatial : x.size(0);
  l.inner = l.format == MemoryFormat::channels_last ? 1 : spatial;
  return l;
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

void check_batch_norm(const Tensor& src, const Tensor& rm, const Tensor& rv, const Tensor& weight,
                      const Tensor& bias, bool training, double eps) {
  check_floating("batch_norm", "src", src);
  check_eps("batch_norm", eps);
  if (src.dim() < 2)
    throw Error(Status::invalid_argument(
        "batch_norm: src must be [N, C, ...] with at least 2 dims, got " + shape_str(src.shape())));
  const int64_t c = src.size(1);
  const std::pair<const char*, const Tensor*> params[] = {
      {"running_mean", &rm}, {"running_var", &rv}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [field, t] : params) {
    check_floating("batch_norm", field, *t);
    if (t->defined() && (t->dim() != 1 || t->size(0) != c))
      throw Error(Status::invalid_argument(std::string("batch_norm: ") + field + " " +
                                           shape_str(t->shape()) + " does not match src " +
                                           shape_str(src.shape()) + " (expected [" +
                                           std::to_string(c) + "], the channel dim)"));
  }
  if (rm.defined() != rv.defined())
    throw Error(Status::invalid_argument(
        "batch_norm: running_mean and running_var must both be given or both be undefined"));
  if (training && src.numel() / std::max<int64_t>(c, 1) <= 1)
    throw Error(Status::invalid_argument(
        "batch_norm: expected more than 1 value per channel when training, got src " +
        shape_str(src.shape())));
}

struct ChannelStats {
  std::vector<double> mean, invstd;  // per channel: the statistics used to normalise
};

}  // namespace

Tensor batch_norm(const Tensor& src_in, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight_in, const Tensor& bias_in, bool training, double momentum,
                  double eps) {
  // The running stats are never cast: a cast would be a copy, and the update must reach
  // the caller's buffers.
  const auto in = ops_detail::autocast_inputs(amp::OpId::batch_norm, {src_in, weight_in, bias_in});
  const Tensor &src = in[0], &weight = in[1], &bias = in[2];
  check_batch_norm(src, running_mean, running_var, weight, bias, training, eps);
  const Tensor x = src.is_dense() ? src.detach() : src.detach().contiguous();
  const ChannelLayout l = layout_of(x);
  const int64_t m = l.per_channel();  // values per channel
  const std::vector<double> xv = load_dense(x);
  const std::vector<double> w = affine_values(weight, l.channels, 1.0);
  const std::vector<double> b = affine_values(bias, l.channels, 0.0);
  const bool batch_stats = training || !running_mean.defined();
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
  if (training && running_mean.defined()) {
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
  if (any_requires_grad({&src, &weight, &bias})) {
    const bool need_x = src.requires_grad();
    const bool need_w = weight.defined() && weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const DType w_dtype = weight.defined() ? weight.dtype() : src.dtype();
    const DType b_dtype = bias.defined() ? bias.dtype() : src.dtype();
    record_op(dst, "batch_norm", {&src, &weight, &bias},
              [x, l, stats, w, batch_stats, need_x, need_w, need_b, w_dtype,
               b_dtype](const Tensor& diff_dst) {
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
                std::vector<Tensor> g(3);
                if (need_x) g[0] = store_dense(dx, x.shape(), x.dtype(), l.format);
                const Shape cs{l.channels};
                if (need_w) g[1] = Tensor::from_vector_f64(sum_dy_xhat, cs, w_dtype);
                if (need_b) g[2] = Tensor::from_vector_f64(sum_dy, cs, b_dtype);
                return g;
              });
  }
  return dst;
}

}  // namespace mixprec
