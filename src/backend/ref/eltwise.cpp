// backend/ref/eltwise.cpp: relu (forward, backward from dst) and the unary math ops,
// elementwise in double. NaN semantics follow PyTorch: relu(NaN) = NaN.
#include <cmath>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {
namespace {

double apply_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::neg: return -x;
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::abs: return std::fabs(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::square: return x * x;
  }
  MIXPREC_CHECK(false, "unary: unknown UnaryOp " + std::to_string(static_cast<int>(op)));
  return 0.0;
}

}  // namespace

Tensor relu_forward(const Tensor& src) {
  check_floating("relu", "src", src);
  std::vector<double> v = read_f64(src);
  // `x > 0 ? x : 0` would turn NaN into 0; PyTorch (clamp_min) keeps the NaN.
  for (double& x : v) x = std::isnan(x) ? x : (x > 0.0 ? x : 0.0);
  return make_tensor(v, src.shape(), src.dtype());
}

Tensor relu_backward(const Tensor& diff_dst, const Tensor& dst) {
  const char* op = "relu_backward";
  check_same_dtype(op, "diff_dst", diff_dst, "dst", dst);
  check_same_shape(op, "diff_dst", diff_dst.shape(), "dst", dst.shape());
  std::vector<double> dy = read_f64(diff_dst);
  const std::vector<double> y = read_f64(dst);
  // PyTorch's threshold_backward: zero where dst <= 0. A NaN dst passes the gradient.
  for (size_t i = 0; i < dy.size(); ++i)
    if (y[i] <= 0.0) dy[i] = 0.0;
  return make_tensor(dy, dst.shape(), dst.dtype());
}

Tensor unary(UnaryOp op, const Tensor& src) {
  check_floating("unary", "src", src);
  std::vector<double> v = read_f64(src);
  for (double& x : v) x = apply_unary(op, x);
  return make_tensor(v, src.shape(), src.dtype());
}

}  // namespace mixprec::backend::ref
