// backend/ref/binary.cpp: elementwise add/sub/mul/div/max/min with numpy broadcasting
// (shapes aligned from the right; a dim broadcasts when it is 1 or absent), in double.
// max/min propagate NaN like torch.maximum/minimum.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {
namespace {

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::max: return "max";
    case BinaryOp::min: return "min";
  }
  return "binary";
}

double apply_binary(BinaryOp op, double a, double b) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::max: return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
    case BinaryOp::min: return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
  }
  MIXPREC_CHECK(false, "binary: unknown BinaryOp " + std::to_string(static_cast<int>(op)));
  return 0.0;
}

// Row-major strides of `shape` right-aligned into `rank` dims, 0 where the dim broadcasts.
Shape broadcast_strides(const Shape& shape, int64_t rank) {
  Shape strides(static_cast<size_t>(rank), 0);
  int64_t stride = 1;
  const auto r = static_cast<int64_t>(shape.size());
  for (int64_t d = r - 1; d >= 0; --d) {
    strides[rank - r + d] = shape[d] == 1 ? 0 : stride;
    stride *= shape[d];
  }
  return strides;
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  check_same_dtype(name, "a", a, "b", b);
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const auto ra = static_cast<int64_t>(as.size()), rb = static_cast<int64_t>(bs.size());
  const int64_t rank = std::max(ra, rb);
  Shape out_shape(static_cast<size_t>(rank));
  // Walk from the last dim so the error names the first mismatch as numpy reports it.
  for (int64_t i = 1; i <= rank; ++i) {
    const int64_t sa = i <= ra ? as[ra - i] : 1;
    const int64_t sb = i <= rb ? bs[rb - i] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      fail(std::string(name) + ": shapes " + shape_str(as) + " and " + shape_str(bs) +
           " are not broadcastable (dim -" + std::to_string(i) + ": " + std::to_string(sa) +
           " vs " + std::to_string(sb) + ")");
    out_shape[rank - i] = sa == 1 ? sb : sa;
  }
  const std::vector<double> x = read_f64(a);
  const std::vector<double> y = read_f64(b);
  const Shape sa = broadcast_strides(as, rank);
  const Shape sb = broadcast_strides(bs, rank);
  std::vector<double> out(static_cast<size_t>(shape_numel(out_shape)));
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t ia = 0, ib = 0;
    for (int64_t d = 0; d < rank; ++d) {
      ia += idx[d] * sa[d];
      ib += idx[d] * sb[d];
    }
    out[i] = apply_binary(op, x[ia], y[ib]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return make_tensor(out, out_shape, a.dtype());
}

}  // namespace mixprec::backend::ref
