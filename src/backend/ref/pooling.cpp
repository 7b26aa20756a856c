// backend/ref/pooling.cpp: 2-D max and average pooling (floor mode), forward and backward,
// following PyTorch's CPU kernels exactly:
// - max: padding is -inf; the first maximum in the window wins a tie; a NaN in the window
//   is the maximum (the last NaN wins). The workspace is an i64 tensor shaped like dst
//   holding the argmax as a flat index ih * W + iw within its [N, C] plane.
// - avg: count_include_pad = true (PyTorch's default): the divisor counts padded cells.
// Letters: N batch, C channels, H/W input size, OH/OW output size.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"
#include "core/storage.h"

namespace mixprec::backend::ref {
namespace {

struct PoolGeom {
  int64_t N, C, H, W, OH, OW;
};

PoolGeom pool_geometry(const char* op, const Shape& src, const Pool2dParams& p) {
  check_rank(op, "src", src, 4);
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1)
    fail(std::string(op) + ": kernel (" + std::to_string(p.kernel_h) + ", " +
         std::to_string(p.kernel_w) + ") and stride (" + std::to_string(p.stride_h) + ", " +
         std::to_string(p.stride_w) + ") must be >= 1");
  // PyTorch's rule; it also guarantees every window holds at least one real input cell.
  if (p.pad_h < 0 || p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w)
    fail(std::string(op) + ": pad (" + std::to_string(p.pad_h) + ", " +
         std::to_string(p.pad_w) + ") must be >= 0 and at most half of kernel (" +
         std::to_string(p.kernel_h) + ", " + std::to_string(p.kernel_w) + ")");
  PoolGeom g{src[0], src[1], src[2], src[3], 0, 0};
  if (p.kernel_h > g.H + 2 * p.pad_h || p.kernel_w > g.W + 2 * p.pad_w)
    fail(std::string(op) + ": src " + shape_str(src) + ": kernel (" +
         std::to_string(p.kernel_h) + ", " + std::to_string(p.kernel_w) +
         ") does not fit the input padded by (" + std::to_string(p.pad_h) + ", " +
         std::to_string(p.pad_w) + ")");
  g.OH = conv_out_size(g.H, p.kernel_h, p.stride_h, p.pad_h);
  g.OW = conv_out_size(g.W, p.kernel_w, p.stride_w, p.pad_w);
  return g;
}

void check_diff_dst(const char* op, const Tensor& diff_dst, const Shape& src_shape,
                    const PoolGeom& g) {
  const Shape expected{g.N, g.C, g.OH, g.OW};
  if (diff_dst.shape() != expected)
    fail(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " must be " +
         shape_str(expected) + " for src " + shape_str(src_shape));
}

}  // namespace

PoolResult max_pool2d_forward(const Tensor& src, const Pool2dParams& p) {
  const char* op = "max_pool2d";
  check_floating(op, "src", src);
  const PoolGeom g = pool_geometry(op, src.shape(), p);
  const std::vector<double> x = read_f64(src);
  const Shape dst_shape{g.N, g.C, g.OH, g.OW};
  std::vector<double> y(static_cast<size_t>(shape_numel(dst_shape)));
  Tensor workspace = Tensor::empty(dst_shape, DType::i64);
  int64_t* argmax = static_cast<int64_t*>(workspace.storage()->data()) + workspace.storage_offset();
  for (int64_t nc = 0; nc < g.N * g.C; ++nc) {
    const double* plane = x.data() + nc * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t h0 = std::max<int64_t>(oh * p.stride_h - p.pad_h, 0);
        const int64_t w0 = std::max<int64_t>(ow * p.stride_w - p.pad_w, 0);
        const int64_t h1 = std::min(oh * p.stride_h - p.pad_h + p.kernel_h, g.H);
        const int64_t w1 = std::min(ow * p.stride_w - p.pad_w + p.kernel_w, g.W);
        // As PyTorch: start from -inf at the first real cell, so an all -inf window still
        // reports a valid index.
        double best = -std::numeric_limits<double>::infinity();
        int64_t best_index = h0 * g.W + w0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const double v = plane[ih * g.W + iw];
            if (v > best || std::isnan(v)) {
              best = v;
              best_index = ih * g.W + iw;
            }
          }
        const int64_t out = (nc * g.OH + oh) * g.OW + ow;
        y[out] = best;
        argmax[out] = best_index;
      }
  }
  return {make_tensor(y, dst_shape, src.dtype()), workspace};
}

Tensor max_pool2d_backward(const Tensor& diff_dst, const Tensor& workspace,
                           const Shape& src_shape, const Pool2dParams& p) {
  const char* op = "max_pool2d_backward";
  check_floating(op, "diff_dst", diff_dst);
  const PoolGeom g = pool_geometry(op, src_shape, p);
  check_diff_dst(op, diff_dst, src_shape, g);
  if (!workspace.defined() || workspace.dtype() != DType::i64 ||
      workspace.shape() != diff_dst.shape())
    fail(std::string(op) + ": workspace " +
         (workspace.defined() ? workspace.str() : std::string("undefined")) +
         " must be i64 with diff_dst's shape " + shape_str(diff_dst.shape()));
  const std::vector<double> dy = read_f64(diff_dst);
  const std::vector<double> ws = read_f64(workspace);  // exact: indices < 2^53
  std::vector<double> dx(static_cast<size_t>(g.N * g.C * g.H * g.W), 0.0);
  const int64_t plane = g.H * g.W;
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t i = 0; i < g.OH * g.OW; ++i) {
      const int64_t out = nc * g.OH * g.OW + i;
      const auto index = static_cast<int64_t>(ws[out]);
      if (index < 0 || index >= plane)
        fail(std::string(op) + ": workspace index " + std::to_string(index) +
             " outside the " + std::to_string(g.H) + "x" + std::to_string(g.W) + " plane");
      // Scatter-add: overlapping windows may pick the same input cell.
      dx[nc * plane + index] += dy[out];
    }
  return make_tensor(dx, src_shape, diff_dst.dtype());
}

namespace {

// PyTorch's avg_pool2d window: the divisor is taken before clipping to the input (so padded
// cells count), the summed cells after.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};

AvgWindow avg_window(const PoolGeom& g, const Pool2dParams& p, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = std::min(h0 + p.kernel_h, g.H + p.pad_h);
  int64_t w1 = std::min(w0 + p.kernel_w, g.W + p.pad_w);
  const double divisor = static_cast<double>((h1 - h0) * (w1 - w0));
  return {std::max<int64_t>(h0, 0), std::min(h1, g.H), std::max<int64_t>(w0, 0),
          std::min(w1, g.W), divisor};
}

}  // namespace

Tensor avg_pool2d_forward(const Tensor& src, const Pool2dParams& p) {
  const char* op = "avg_pool2d";
  check_floating(op, "src", src);
  const PoolGeom g = pool_geometry(op, src.shape(), p);
  const std::vector<double> x = read_f64(src);
  std::vector<double> y(static_cast<size_t>(g.N * g.C * g.OH * g.OW));
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const AvgWindow win = avg_window(g, p, oh, ow);
        double sum = 0.0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += x[(nc * g.H + ih) * g.W + iw];
        y[(nc * g.OH + oh) * g.OW + ow] = sum / win.divisor;
      }
  return make_tensor(y, {g.N, g.C, g.OH, g.OW}, src.dtype());
}

Tensor avg_pool2d_backward(const Tensor& diff_dst, const Shape& src_shape,
                           const Pool2dParams& p) {
  const char* op = "avg_pool2d_backward";
  check_floating(op, "diff_dst", diff_dst);
  const PoolGeom g = pool_geometry(op, src_shape, p);
  check_diff_dst(op, diff_dst, src_shape, g);
  const std::vector<double> dy = read_f64(diff_dst);
  std::vector<double> dx(static_cast<size_t>(g.N * g.C * g.H * g.W), 0.0);
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const AvgWindow win = avg_window(g, p, oh, ow);
        const double d = dy[(nc * g.OH + oh) * g.OW + ow] / win.divisor;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) dx[(nc * g.H + ih) * g.W + iw] += d;
      }
  return make_tensor(dx, src_shape, diff_dst.dtype());
}

}  // namespace mixprec::backend::ref
