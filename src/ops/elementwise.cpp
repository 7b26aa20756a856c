// elementwise.cpp: binary ops with numpy broadcasting (promote policy: mixed dtypes run in
// the widest) and unary math, forward and backward together.
#include "autograd/node.h"
#include "mixprec/autograd/autograd.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

Tensor run_binary(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  return ops_detail::dispatch(name, a.dtype(), [&] { return onednn::binary(op, a, b); },
                              [&] { return ref::binary(op, a, b); });
}

Tensor run_unary(const char* name, UnaryOp op, const Tensor& a) {
  return ops_detail::dispatch(name, a.dtype(), [&] { return onednn::unary(op, a); },
                              [&] { return ref::unary(op, a); });
}

Tensor run_scale(const Tensor& a, double alpha, double beta) {
  return ops_detail::dispatch("linear_scale", a.dtype(),
                              [&] { return onednn::linear_scale(a, alpha, beta); },
                              [&] { return ref::linear_scale(a, alpha, beta); });
}

// Gradient of a broadcast input: sum diff over the dims that were broadcast.
// g: [..broadcast shape..] -> shape (leading dims summed away, size-1 dims summed keepdim).
Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - int64_t(shape.size());
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < g.dim(); ++i)
    if (i < lead || (shape[size_t(i - lead)] == 1 && g.size(i) != 1)) axes.push_back(i);
  Tensor r = axes.empty() ? g : sum(g, axes, /*keepdim=*/true);
  return reshape(r, shape);
}

// Both operands in one dtype: the autocast policy's choice when autocast is on, else the
// common dtype (binary kernels take one dtype).
std::pair<Tensor, Tensor> promote(amp::OpId op, const Tensor& a_in, const Tensor& b_in) {
  const auto in = ops_detail::autocast_inputs(op, {a_in, b_in});
  const DType t = promote_types(in[0].dtype(), in[1].dtype());
  return {in[0].to(t), in[1].to(t)};
}

}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = promote(amp::OpId::add, a_in, b_in);
  Tensor out = run_binary("add", BinaryOp::add, a, b);
  if (any_requires_grad({&a, &b})) {
    record_op(out, "add", {&a, &b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
      return std::vector<Tensor>{sum_to_shape(g, sa), sum_to_shape(g, sb)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = promote(amp::OpId::sub, a_in, b_in);
  Tensor out = run_binary("sub", BinaryOp::sub, a, b);
  if (any_requires_grad({&a, &b})) {
    record_op(out, "sub", {&a, &b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
      return std::vector<Tensor>{sum_to_shape(g, sa), sum_to_shape(neg(g), sb)};
    });
  }
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = promote(amp::OpId::mul, a_in, b_in);
  Tensor out = run_binary("mul", BinaryOp::mul, a, b);
  if (any_requires_grad({&a, &b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    Tensor ca = need_b ? a.detach() : Tensor(), cb = need_a ? b.detach() : Tensor();
    record_op(out, "mul", {&a, &b}, [ca, cb, sa = a.shape(), sb = b.shape()](const Tensor& g) {
      return std::vector<Tensor>{cb.defined() ? sum_to_shape(mul(g, cb), sa) : Tensor(),
                                 ca.defined() ? sum_to_shape(mul(g, ca), sb) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = promote(amp::OpId::div, a_in, b_in);
  Tensor out = run_binary("div", BinaryOp::div, a, b);
  if (any_requires_grad({&a, &b})) {
    Tensor ca = a.detach(), cb = b.detach();
    record_op(out, "div", {&a, &b}, [ca, cb, sa = a.shape(), sb = b.shape()](const Tensor& g) {
      // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2
      Tensor ga = sum_to_shape(div(g, cb), sa);
      Tensor gb = sum_to_shape(neg(div(mul(g, ca), mul(cb, cb))), sb);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

namespace {

// a * s + shift in a's dtype: mul/add by a scalar and neg, after their own row's cast.
Tensor scale_op(const char* name, const Tensor& a, double s, double shift) {
  Tensor out = run_scale(a, s, shift);
  if (any_requires_grad({&a}))
    record_op(out, name, {&a},
              [s](const Tensor& g) { return std::vector<Tensor>{s == 1.0 ? g : mul(g, s)}; });
  return out;
}

}  // namespace

// One tensor: mul's and add's promote rows leave it as it is (PyTorch runs a tensor times a
// Python scalar in the tensor's dtype), unless overridden.
Tensor mul(const Tensor& a, double s) {
  return scale_op("mul_scalar", ops_detail::autocast_input(amp::OpId::mul, a), s, 0.0);
}

Tensor add(const Tensor& a, double s) {
  return scale_op("add_scalar", ops_detail::autocast_input(amp::OpId::add, a), 1.0, s);
}

Tensor neg(const Tensor& a) { return scale_op("neg", ops_detail::autocast_input(amp::OpId::neg, a), -1.0, 0.0); }

Tensor exp(const Tensor& a_in) {
  const Tensor a = ops_detail::autocast_inputs(amp::OpId::exp, {a_in})[0];
  Tensor out = run_unary("exp", UnaryOp::exp, a);
  if (any_requires_grad({&a}))
    record_op(out, "exp", {&a}, [dst = out.detach()](const Tensor& g) {
      return std::vector<Tensor>{mul(g, dst)};  // d exp(x) = exp(x)
    });
  return out;
}

Tensor log(const Tensor& a_in) {
  const Tensor a = ops_detail::autocast_inputs(amp::OpId::log, {a_in})[0];
  // f32 on backend/cpu's own log (oneDNN's is up to 3.7e-6 off, absolutely: cpu/log.h).
  Tensor out = ops_detail::route(
      "log", a.dtype(), cpu::log_applies(a), [&] { return cpu::log_forward(a); },
      [&] { return onednn::unary(UnaryOp::log, a); }, [&] { return ref::unary(UnaryOp::log, a); });
  if (any_requires_grad({&a}))
    record_op(out, "log", {&a}, [src = a.detach()](const Tensor& g) {
      return std::vector<Tensor>{div(g, src)};  // d log(x) = 1/x
    });
  return out;
}

Tensor sigmoid(const Tensor& a_in) {
  const Tensor a = ops_detail::autocast_input(amp::OpId::sigmoid, a_in);
  Tensor out = run_unary("sigmoid", UnaryOp::sigmoid, a);
  if (any_requires_grad({&a}))
    record_op(out, "sigmoid", {&a}, [y = out.detach()](const Tensor& g) {
      return std::vector<Tensor>{mul(g, mul(y, add(neg(y), 1.0)))};  // d sigmoid(x) = y (1 - y)
    });
  return out;
}

Tensor tanh(const Tensor& a_in) {
  const Tensor a = ops_detail::autocast_input(amp::OpId::tanh, a_in);
  Tensor out = run_unary("tanh", UnaryOp::tanh, a);
  if (any_requires_grad({&a}))
    record_op(out, "tanh", {&a}, [y = out.detach()](const Tensor& g) {
      return std::vector<Tensor>{mul(g, add(neg(mul(y, y)), 1.0))};  // d tanh(x) = 1 - y^2
    });
  return out;
}

Tensor sqrt(const Tensor& a_in) {
  const Tensor a = ops_detail::autocast_input(amp::OpId::sqrt, a_in);
  Tensor out = run_unary("sqrt", UnaryOp::sqrt, a);
  if (any_requires_grad({&a}))
    record_op(out, "sqrt", {&a}, [y = out.detach()](const Tensor& g) {
      // d sqrt(x) = 1 / (2 y): inf at 0, as PyTorch's
      return std::vector<Tensor>{div(g, mul(y, 2.0))};
    });
  return out;
}

}  // namespace mixprec
