// backend/ref/softmax.cpp: softmax and log_softmax over one axis, forward and backward
// (from dst), in double. The tensor is viewed as [outer, L, inner] with L the axis length.
//   softmax:      y = exp(x - max) / sum exp(x - max)
//                 dx = y * (dy - sum(dy * y))
//   log_softmax:  y = x - max - log(sum exp(x - max))
//                 dx = dy - exp(y) * sum(dy)
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {
namespace {

struct AxisGeom {
  int64_t outer, L, inner;
};

AxisGeom axis_geometry(const char* op, const Shape& shape, int64_t axis) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= rank)
    fail(std::string(op) + ": axis " + std::to_string(axis) + " out of range for src " +
         shape_str(shape) + " (expected 0.." + std::to_string(rank - 1) + ")");
  AxisGeom g{1, shape[axis], 1};
  for (int64_t d = 0; d < axis; ++d) g.outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) g.inner *= shape[d];
  return g;
}

// Forward for both flavours; `log` picks log_softmax.
Tensor softmax_impl(const char* op, const Tensor& src, int64_t axis, bool log) {
  check_floating(op, "src", src);
  const AxisGeom g = axis_geometry(op, src.shape(), axis);
  std::vector<double> v = read_f64(src);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < g.inner; ++i) {
      double* row = v.data() + o * g.L * g.inner + i;  // element l at row[l * inner]
      // Subtracting the max keeps exp() finite; NaN anywhere makes the row NaN, as in
      // PyTorch (std::max would silently skip a NaN).
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < g.L; ++l) {
        const double x = row[l * g.inner];
        mx = std::isnan(x) || std::isnan(mx) ? std::numeric_limits<double>::quiet_NaN()
                                              : std::max(mx, x);
      }
      double sum = 0.0;
      for (int64_t l = 0; l < g.L; ++l) sum += std::exp(row[l * g.inner] - mx);
      const double log_sum = std::log(sum);
      for (int64_t l = 0; l < g.L; ++l) {
        double& x = row[l * g.inner];
        x = log ? x - mx - log_sum : std::exp(x - mx) / sum;
      }
    }
  return make_tensor(v, src.shape(), src.dtype());
}

Tensor softmax_backward_impl(const char* op, const Tensor& diff_dst, const Tensor& dst,
                             int64_t axis, bool log) {
  check_same_dtype(op, "diff_dst", diff_dst, "dst", dst);
  check_same_shape(op, "diff_dst", diff_dst.shape(), "dst", dst.shape());
  const AxisGeom g = axis_geometry(op, dst.shape(), axis);
  std::vector<double> dy = read_f64(diff_dst);
  const std::vector<double> y = read_f64(dst);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < g.inner; ++i) {
      const int64_t base = o * g.L * g.inner + i;
      double dot = 0.0;  // softmax: sum(dy * y); log_softmax: sum(dy)
      for (int64_t l = 0; l < g.L; ++l) {
        const int64_t k = base + l * g.inner;
        dot += log ? dy[k] : dy[k] * y[k];
      }
      for (int64_t l = 0; l < g.L; ++l) {
        const int64_t k = base + l * g.inner;
        dy[k] = log ? dy[k] - std::exp(y[k]) * dot : y[k] * (dy[k] - dot);
      }
    }
  return make_tensor(dy, dst.shape(), dst.dtype());
}

}  // namespace

Tensor softmax_forward(const Tensor& src, int64_t axis) {
  return softmax_impl("softmax", src, axis, /*log=*/false);
}

Tensor log_softmax_forward(const Tensor& src, int64_t axis) {
  return softmax_impl("log_softmax", src, axis, /*log=*/true);
}

Tensor softmax_backward(const Tensor& diff_dst, const Tensor& dst, int64_t axis) {
  return softmax_backward_impl("softmax_backward", diff_dst, dst, axis, /*log=*/false);
}

Tensor log_softmax_backward(const Tensor& diff_dst, const Tensor& dst, int64_t axis) {
  return softmax_backward_impl("log_softmax_backward", diff_dst, dst, axis, /*log=*/true);
}

}  // namespace mixprec::backend::ref
