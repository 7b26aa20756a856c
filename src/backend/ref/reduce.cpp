// backend/ref/reduce.cpp: sum/mean/max/min over a set of axes, in double. Every input
// element is folded into the output cell it maps to once the reduced axes are dropped.
// Semantics as PyTorch: mean of an empty set is NaN, max/min of an empty set is an error,
// max/min propagate NaN. An empty `axes` reduces nothing (numpy's axis=()): a copy.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {
namespace {

std::string axes_str(const std::vector<int64_t>& axes) { return shape_str(Shape(axes)); }

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& src, const std::vector<int64_t>& axes, bool keepdim) {
  const char* name = reduce_name(op);
  check_floating(name, "src", src);
  const Shape& shape = src.shape();
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank || (i > 0 && axes[i] <= axes[i - 1]))
      fail(std::string(name) + ": axes " + axes_str(axes) + " for src " + shape_str(shape) +
           " must be sorted, unique and in 0.." + std::to_string(rank - 1));
    reduced[axes[i]] = true;
  }
  // keep_shape has size 1 at reduced axes; its row-major strides, zeroed at reduced axes,
  // map an input index to its output cell.
  Shape keep_shape = shape, out_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      count *= shape[d];
      keep_shape[d] = 1;
      if (keepdim) out_shape.push_back(1);
    } else {
      out_shape.push_back(shape[d]);
    }
  }
  if (count == 0 && (op == ReduceOp::max || op == ReduceOp::min))
    fail(std::string(name) + ": axes " + axes_str(axes) + " of src " + shape_str(shape) +
         " hold no elements; max/min of an empty set is undefined");
  Shape out_strides(static_cast<size_t>(rank), 0);
  for (int64_t d = rank - 1, stride = 1; d >= 0; --d) {
    out_strides[d] = reduced[d] ? 0 : stride;
    stride *= keep_shape[d];
  }

  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double init = op == ReduceOp::max ? -kInf : op == ReduceOp::min ? kInf : 0.0;
  std::vector<double> out(static_cast<size_t>(shape_numel(out_shape)), init);
  const std::vector<double> x = read_f64(src);
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d) o += idx[d] * out_strides[d];
    double& acc = out[o];
    const double v = x[i];
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean: acc += v; break;
      // std::max/min drop a NaN depending on argument order; acc + v keeps it.
      case ReduceOp::max: acc = std::isnan(acc) || std::isnan(v) ? acc + v : std::max(acc, v); break;
      case ReduceOp::min: acc = std::isnan(acc) || std::isnan(v) ? acc + v : std::min(acc, v); break;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  if (op == ReduceOp::mean)
    for (double& v : out) v /= static_cast<double>(count);  // 0/0 = NaN, as PyTorch
  return make_tensor(out, out_shape, src.dtype());
}

}  // namespace mixprec::backend::ref
