// backend/cpu/norm.h: layer_norm (norm.cpp) and batch_norm (batch_norm.cpp) kernels,
// forward and backward. Every value is widened to double; statistics and outputs are
// computed in double and rounded once to the storage dtype, so statistics are at least as
// precise as f32 and f64 gradchecks are exact to roundoff. Results do not depend on the
// thread count (fixed summation order).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/backend/batch_norm_sync.h"
#include "mixprec/core/tensor.h"

namespace mixprec::backend::cpu {

// ---- layer_norm over rows of d contiguous values ----
struct LayerNormStats {
  std::vector<double> mean, rstd;  // per row: mean and 1 / sqrt(biased var + eps)
};
// x: contiguous; w, b: d doubles (1 and 0 without affine). Returns y (x's shape and dtype)
// and fills stats.
Tensor layer_norm_forward(const Tensor& x, int64_t d, const std::vector<double>& w,
                          const std::vector<double>& b, double eps, LayerNormStats& stats);
struct LayerNormGrads {
  Tensor dx;                  // when need_x
  std::vector<double> dw, db;  // d values each (zeros unless need_wb)
};
LayerNormGrads layer_norm_backward(const Tensor& x, const Tensor& diff_dst, int64_t d,
                                   const std::vector<double>& w, const LayerNormStats& stats,
                                   bool need_x, bool need_wb);

// ---- batch_norm over [N, C, ...], any dense layout ----
// Element (o, c, j) of a dense [N, C, ...] buffer sits at (o * channels + c) * inner + j:
// contiguous has outer = N, inner = H*W; channels-last has outer = N*H*W, inner = 1.
struct ChannelLayout {
  int64_t outer = 0, channels = 0, inner = 0;
  MemoryFormat format = MemoryFormat::contiguous;
  int64_t per_channel() const { return outer * inner; }
};
ChannelLayout channel_layout(const Tensor& x);
struct ChannelStats {
  std::vector<double> mean, invstd;  // per channel: the statistics used to normalise
  double count = 0.0;                // values per channel they were taken over (all processes')
};
struct BatchNormForward {
  Tensor dst;  // x's shape, dtype and memory format
  std::shared_ptr<ChannelStats> stats;
};
// x dense. batch_stats: normalise with x's statistics, else with running_mean/var. With
// update_running, running_mean/var (handles) are updated in place by PyTorch's rule
// (momentum; the unbiased variance for running_var). With `sync` (and batch_stats), the
// statistics are those of every process's batch (batch_norm_sync.h).
BatchNormForward batch_norm_forward(const Tensor& x, const std::vector<double>& w,
                                    const std::vector<double>& b, bool batch_stats,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    bool update_running, double momentum, double eps,
                                    const BatchNormSync* sync = nullptr);
struct BatchNormGrads {
  Tensor dx;                                // when need_x
  std::vector<double> sum_dy, sum_dy_xhat;  // per channel: d bias, d weight
};
// sum_dy and sum_dy_xhat are this process's own; with `sync`, dx uses their sums over the
// processes.
BatchNormGrads batch_norm_backward(const Tensor& x, const Tensor& diff_dst,
                                   const ChannelStats& stats, const std::vector<double>& w,
                                   bool batch_stats, bool need_x, const BatchNormSync* sync = nullptr);

}  // namespace mixprec::backend::cpu
