// loss.cpp: nll_loss, cross_entropy and mse_loss (fp32 policy: losses are computed in f32
// whatever the input dtype), and argmax for accuracy.
#include <cmath>
#include <cstring>

#include "autograd/node.h"
#include "mixprec/autograd.h"
#include "mixprec/amp.h"
#include "mixprec/ops.h"
#include "mixprec/status.h"

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
  const Tensor log_probs_in = amp::cast_inputs(amp::OpId::nll_loss, {log_probs_raw})[0];
  const std::vector<int64_t> t = checked_targets("nll_loss", log_probs_in, target);
  Tensor lp = log_probs_in.dtype() == DType::f64 ? log_probs_in : log_probs_in.to(DType::f32);
  const int64_t N = lp.size(0), C = lp.size(1);
  const DType dt = lp.dtype();
  Tensor lpc = lp.contiguous().detach();
  std::vector<double> picked(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) picked[size_t(i)] = -lpc.at(i * C + t[size_t(i)]);
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
      std::vector<double> g(size_t(N * C), 0.0);
      const std::vector<double> gd = diff_dst.to_vector_f64();
      for (int64_t i = 0; i < N; ++i) {
        const double gi = r == Reduction::none ? gd[size_t(i)] : gd[0];
        g[size_t(i * C + t[size_t(i)])] = -gi / (r == Reduction::mean ? double(N) : 1.0);
      }
      return std::vector<Tensor>{Tensor::from_vector_f64(g, {N, C}, dt)};
    });
  }
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction r) {
  checked_targets("cross_entropy", logits, target);
  // fp32 policy whether or not autocast is on: the loss is always computed in f32.
  Tensor x = logits.dtype() == DType::f64 ? logits : logits.to(DType::f32);
  return nll_loss(log_softmax(x, 1), target, r);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r) {
  if (input.shape() != target.shape())
    throw Error(Status::invalid_argument("mse_loss: input " + shape_str(input.shape()) +
                                         " and target " + shape_str(target.shape()) +
                                         " must have the same shape"));
  const DType dt = input.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor d = sub(input.to(dt), target.to(dt));
  Tensor sq = mul(d, d);
  if (r == Reduction::none) return sq;
  return r == Reduction::mean ? mean(sq) : sum(sq);
}

Tensor argmax(const Tensor& src) {
  if (src.dim() != 2)
    throw Error(Status::invalid_argument("argmax: expected [N, C], got " + shape_str(src.shape())));
  const int64_t N = src.size(0), C = src.size(1);
  const std::vector<float> v = src.to_vector();
  Tensor out = Tensor::empty({N}, DType::i64);
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (v[size_t(i * C + c)] > v[size_t(i * C + best)]) best = c;
    o[i] = best;
  }
  return out;
}

}  // namespace mixprec
