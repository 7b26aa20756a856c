// loss.cpp: nll_loss, cross_entropy and mse_loss (fp32 policy under autocast; without
// autocast too, 16-bit inputs give an f32 loss: docs/amp.md), and argmax for accuracy.
#include <memory>

#include "autograd/node.h"
#include "mixprec/autograd/autograd.h"
#include "ops/autocast_hook.h"
#include "ops/dispatch.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"

namespace mixprec {

namespace {

std::vector<int64_t> checked_targets(const char* op, const Tensor& input, const Tensor& target) {
  if (input.dim() != 2)
    throw Error(Status::invalid_argument(std::string(op) + ": expected input [N, C], got " +
                                         shape_str(input.shape())));
  if (target.dim() != 1 || target.size(0) != input.size(0))
    throw Error(Status::invalid_argument(std::string(op) + ": target " + shape_str(target.shape()) +
                                         " does not match input " + shape_str(input.shape()) +
                                         " (expected [" + std::to_string(input.size(0)) + "])"));
  if (target.dtype() != DType::i64 && target.dtype() != DType::i32 && target.dtype() != DType::u8)
    throw Error(Status::invalid_argument(std::string(op) + ": target must hold class indices "
                                         "(i64), got " + target.str()));
  const int64_t C = input.size(1);
  std::vector<int64_t> t(size_t(target.numel()));
  for (int64_t i = 0; i < target.numel(); ++i) {
    t[size_t(i)] = int64_t(target.at(i));
    if (t[size_t(i)] < 0 || t[size_t(i)] >= C)
      throw Error(Status::invalid_argument(std::string(op) + ": target " + std::to_string(t[size_t(i)]) +
                                           " at index " + std::to_string(i) + " is out of range [0, " +
                                           std::to_string(C) + ")"));
  }
  return t;
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs_raw, const Tensor& target, Reduction r) {
  const Tensor log_probs_in = ops_detail::autocast_inputs(amp::OpId::nll_loss, {log_probs_raw})[0];
  const std::vector<int64_t> t = checked_targets("nll_loss", log_probs_in, target);
  Tensor lp = log_probs_in.dtype() == DType::f64 ? log_probs_in : log_probs_in.to(DType::f32);
  const int64_t N = lp.size(0), C = lp.size(1);
  const DType dt = lp.dtype();
  const std::vector<double> picked = ops_detail::dispatch_cpu("nll_loss", dt, [&] { return backend::cpu::nll_rows(lp, t); });
  Tensor out;
  if (r == Reduction::none) {
    out = Tensor::from_vector_f64(picked, {N}, dt);
  } else {
    double total = 0;
    for (double v : picked) total += v;
    out = Tensor::scalar(r == Reduction::mean ? total / double(std::max<int64_t>(N, 1)) : total, dt);
  }
  if (any_requires_grad({&lp})) {
    record_op(out, "nll_loss", {&lp}, [t, N, C, r, dt](const Tensor& diff_dst) {
      // d/d lp[i, t_i] = -g_i (/N for mean); zero elsewhere.
      return std::vector<Tensor>{ops_detail::dispatch_cpu("nll_loss_backward", dt, [&] {
        return backend::cpu::nll_backward(diff_dst.to_vector_f64(), r == Reduction::none, r == Reduction::mean, t, N,
                                          C, dt);
      })};
    });
  }
  return out;
}

// cross_entropy in one pass per row, in float64: lse = m + log(sum exp(x - m)), loss =
// lse - x[target], gradient g * (exp(x - lse) - onehot) (/ N for mean), each rounded once.
// Composing log_softmax and nll_loss instead rounds the log-probabilities to f32 and runs
// oneDNN's approximate exp on them in backward: 50-80 ulp off in the gradient (PyTorch's
// is within 1 ulp of float64; tests/unit/ops/cross_entropy_test.cpp). Rows are independent
// and each is summed serially, so the results do not depend on the thread count.
Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, Reduction r) {
  const Tensor logits = ops_detail::autocast_input(amp::OpId::cross_entropy, logits_in);
  if (!logits.defined() || !is_floating(logits.dtype()))
    throw Error(Status::invalid_argument("cross_entropy: logits must be floating, got " +
                                         (logits.defined() ? logits.str() : std::string("undefined"))));
  const std::vector<int64_t> t = checked_targets("cross_entropy", logits, target);
  // The loss is f32 for 16-bit logits (f64 stays f64), with or without autocast.
  const DType dt = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const int64_t N = logits.size(0);
  const Tensor x = logits.contiguous().detach();
  auto lse = std::make_shared<std::vector<double>>();
  const std::vector<double> rows =
      ops_detail::dispatch_cpu("cross_entropy", x.dtype(), [&] { return backend::cpu::cross_entropy_rows(x, t, *lse); });
  Tensor out;
  if (r == Reduction::none) {
    out = Tensor::from_vector_f64(rows, {N}, dt);
  } else {
    double total = 0;
    for (double v : rows) total += v;
    out = Tensor::scalar(r == Reduction::mean ? total / double(std::max<int64_t>(N, 1)) : total, dt);
  }
  if (any_requires_grad({&logits})) {
    record_op(out, "cross_entropy", {&logits}, [x, t, lse, r](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch_cpu("cross_entropy_backward", x.dtype(), [&] {
        return backend::cpu::cross_entropy_backward(x, diff_dst.to_vector_f64(), r == Reduction::none,
                                                    r == Reduction::mean, t, *lse);
      })};
    });
  }
  return out;
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction r) {
  if (input_in.shape() != target_in.shape())
    throw Error(Status::invalid_argument("mse_loss: input " + shape_str(input_in.shape()) +
                                         " and target " + shape_str(target_in.shape()) +
                                         " must have the same shape"));
  const auto in = ops_detail::autocast_inputs(amp::OpId::mse_loss, {input_in, target_in});
  // Computed in f32 for 16-bit inputs (f64 stays f64), with or without autocast; the ops
  // below run on the cast inputs without applying their own rows.
  const DType dt = in[0].dtype() == DType::f64 ? DType::f64 : DType::f32;
  ops_detail::AutocastOff inside;
  Tensor d = sub(in[0].to(dt), in[1].to(dt));
  Tensor sq = mul(d, d);
  if (r == Reduction::none) return sq;
  return r == Reduction::mean ? mean(sq) : sum(sq);
}

Tensor argmax(const Tensor& src) {
  if (src.dim() != 2)
    throw Error(Status::invalid_argument("argmax: expected [N, C], got " + shape_str(src.shape())));
  return ops_detail::dispatch_cpu("argmax", src.dtype(), [&] { return backend::cpu::argmax_rows(src); });
}

}  // namespace mixprec
