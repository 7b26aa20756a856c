// reduce.cpp: sum and mean (fp32 policy under autocast), forward and backward.
#include <algorithm>

#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

std::vector<int64_t> normalize_axes(const char* op, const Tensor& src, std::vector<int64_t> dims) {
  const int64_t n = src.dim();
  for (auto& d : dims) {
    const int64_t k = d < 0 ? d + n : d;
    if (k < 0 || k >= n)
      throw Error(Status::invalid_argument(std::string(op) + ": dim " + std::to_string(d) +
                                           " out of range for " + src.str()));
    d = k;
  }
  // A dim named twice (0 and -n count as the same) is refused, as PyTorch refuses it ("dim 0
  // appears multiple times in the list of dims"): dropping the copy silently would hide a
  // caller's mistake, and the reductions must agree on what they reduce.
  std::sort(dims.begin(), dims.end());
  const auto twice = std::adjacent_find(dims.begin(), dims.end());
  if (twice != dims.end())
    throw Error(Status::invalid_argument(std::string(op) + ": dim " + std::to_string(*twice) +
                                         " appears twice in the list of dims for " + src.str()));
  return dims;
}

// diff_dst has the reduced shape; spread it back over the input shape (times `scale`).
Tensor expand_back(const Tensor& diff_dst, const Shape& src_shape,
                   const std::vector<int64_t>& axes, double scale) {
  Shape kept = src_shape;
  for (auto a : axes) kept[size_t(a)] = 1;
  Tensor g = reshape(diff_dst, kept);
  // ones(src_shape) * g broadcasts g over the reduced axes.
  Tensor ones = Tensor::full(src_shape, scale, diff_dst.dtype());
  return mul(ones, g);
}

Tensor reduce_op(const char* op, ReduceOp kind, const Tensor& src, std::vector<int64_t> dims,
                 bool keepdim) {
  if (!is_floating(src.dtype()))
    throw Error(Status::invalid_argument(std::string(op) + ": needs a floating tensor, got " + src.str()));
  const std::vector<int64_t> axes = normalize_axes(op, src, std::move(dims));
  // Sums and means over axes oneDNN runs on its reference kernel (not one trailing run):
  // backend/cpu/reduce_sum.h.
  const bool cpu_applies = (kind == ReduceOp::sum || kind == ReduceOp::mean) && cpu::reduce_sum_applies(src, axes);
  Tensor dst = ops_detail::route(
      op, src.dtype(), cpu_applies, [&] { return cpu::reduce_sum(src, axes, keepdim, kind == ReduceOp::mean); },
      [&] { return onednn::reduce(kind, src, axes, keepdim); }, [&] { return ref::reduce(kind, src, axes, keepdim); });
  if (any_requires_grad({&src})) {
    int64_t count = 1;
    for (auto a : axes) count *= src.size(a);
    const double scale = kind == ReduceOp::mean ? 1.0 / double(std::max<int64_t>(count, 1)) : 1.0;
    record_op(dst, op, {&src}, [src_shape = src.shape(), axes, scale](const Tensor& diff_dst) {
      return std::vector<Tensor>{expand_back(diff_dst, src_shape, axes, scale)};
    });
  }
  return dst;
}

std::vector<int64_t> all_axes(const Tensor& src) {
  std::vector<int64_t> axes(size_t(src.dim()));
  for (int64_t i = 0; i < src.dim(); ++i) axes[size_t(i)] = i;
  return axes;
}

}  // namespace

Tensor sum(const Tensor& src, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce_op("sum", ReduceOp::sum, ops_detail::autocast_inputs(amp::OpId::sum, {src})[0], dims, keepdim);
}
Tensor mean(const Tensor& src, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce_op("mean", ReduceOp::mean, ops_detail::autocast_inputs(amp::OpId::mean, {src})[0], dims,
                   keepdim);
}
Tensor sum(const Tensor& src) { return sum(src, all_axes(src), false); }
Tensor mean(const Tensor& src) { return mean(src, all_axes(src), false); }

}  // namespace mixprec
