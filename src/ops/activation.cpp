// activation.cpp: relu, exact GELU and dropout (keep rows of the policy table: they run
// in their input dtype) and pow by a scalar (its own keep row), forward and backward.
// Kernels (through ops/dispatch.h's route): relu on dense f32/bf16/f16 runs backend/cpu's
// relu, other layouts oneDNN, f64 ref. GELU, dropout and pow run backend/cpu/activation.h
// (no ref kernel).
#include <memory>

#include "autograd/node.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/autocast_hook.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

void check_floating(const char* op, const Tensor& src) {
  if (!src.defined() || !is_floating(src.dtype()))
    throw Error(
        Status::invalid_argument(std::string(op) + ": needs a floating tensor, got " +
                                 (src.defined() ? src.str() : std::string("undefined"))));
}

// A dense version of t (no autograd) whose buffer order the elementwise kernels walk.
Tensor dense(const Tensor& t) { return t.is_dense() ? t.detach() : t.detach().contiguous(); }

}  // namespace

Tensor relu(const Tensor& src_in) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::relu, src_in);
  if (!is_floating(src.dtype()))
    throw Error(Status::invalid_argument("relu: needs a floating tensor, got " + src.str()));
  // backend/cpu's relu keeps NaN as PyTorch does (oneDNN 2.6's maps NaN to 0 and would hide
  // a diverged model); it takes dense f32/bf16/f16, oneDNN the other layouts, ref f64.
  const bool own = backend::cpu::relu_supported(src) && ops_detail::onednn_enabled_for(src.dtype());
  Tensor dst = ops_detail::route(
      "relu", src.dtype(), own, [&] { return cpu::relu_forward(src); }, [&] { return onednn::relu_forward(src); },
      [&] { return ref::relu_forward(src); });
  if (any_requires_grad({&src})) {
    // Backward needs only the output's sign pattern; the input can be freed.
    record_op(dst, "relu", {&src}, [d = dst.detach(), own](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::route(
          "relu_backward", d.dtype(), own && diff_dst.dtype() == d.dtype(),
          [&] { return cpu::relu_backward(diff_dst, d); }, [&] { return onednn::relu_backward(diff_dst, d); },
          [&] { return ref::relu_backward(diff_dst, d); })};
    });
  }
  return dst;
}

Tensor gelu(const Tensor& src_in) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::gelu, src_in);
  check_floating("gelu", src);
  const Tensor x = dense(src);
  Tensor dst = ops_detail::dispatch_cpu("gelu", x.dtype(), [&] { return cpu::gelu_forward(x); });
  if (any_requires_grad({&src})) {
    record_op(dst, "gelu", {&src}, [x](const Tensor& diff_dst) {
      return std::vector<Tensor>{
          ops_detail::dispatch_cpu("gelu_backward", x.dtype(), [&] { return cpu::gelu_backward(x, diff_dst); })};
    });
  }
  return dst;
}

Tensor dropout(const Tensor& src_in, double p, bool training) {
  if (!(p >= 0.0 && p < 1.0))
    throw Error(Status::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p)));
  const Tensor src = ops_detail::autocast_input(amp::OpId::dropout, src_in);
  check_floating("dropout", src);
  if (!training || p == 0.0) return src;
  const Tensor x = dense(src);
  const double scale = 1.0 / (1.0 - p);
  auto keep = cpu::dropout_mask(x.numel(), p);
  Tensor dst = ops_detail::dispatch_cpu("dropout", x.dtype(), [&] { return cpu::dropout_forward(x, *keep, scale); });
  if (any_requires_grad({&src})) {
    // Backward needs the mask, not the input.
    record_op(dst, "dropout", {&src},
              [keep, scale, shape = x.shape(), format = x.suggest_memory_format(),
               dtype = x.dtype()](const Tensor& diff_dst) {
                return std::vector<Tensor>{ops_detail::dispatch_cpu("dropout_backward", dtype, [&] {
                  return cpu::dropout_backward(diff_dst, *keep, scale, shape, format, dtype);
                })};
              });
  }
  return dst;
}

// Under autocast pow keeps its input dtype (its row); x^e amplifies relative error by |e|,
// so callers who want f32 cast first (or override the row).
Tensor pow(const Tensor& src_in, double exponent) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::pow, src_in);
  check_floating("pow", src);
  const Tensor x = dense(src);
  Tensor dst = ops_detail::dispatch_cpu("pow", x.dtype(), [&] { return cpu::pow_forward(x, exponent); });
  if (any_requires_grad({&src})) {
    record_op(dst, "pow", {&src}, [x, exponent](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch_cpu(
          "pow_backward", x.dtype(), [&] { return cpu::pow_backward(x, diff_dst, exponent); })};
    });
  }
  return dst;
}

}  // namespace mixprec
