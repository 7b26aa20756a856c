// backend/cpu/norm.cpp: see norm.h. layer_norm runs row by row (each thread converts its
// own rows to double and back, backend/cpu/layer_norm_rows.h): no full-tensor double
// copies, which cost ~10 ms per call at [4096, 256] in page faults and conversions.
#include "backend/cpu/norm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/layer_norm_rows.h"
#include "core/convert.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {

namespace {

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = int64_t(1) << 15;

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

}  // namespace mixprec::backend::cpu
