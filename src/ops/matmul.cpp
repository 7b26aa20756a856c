// matmul.cpp: linear and matmul (lower policy under autocast), forward and backward.
// Dimension letters: N batch rows, K input features, O output features; M, K, N for matmul.
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (b.defined() && a.dtype() != b.dtype())
    throw Error(Status::invalid_argument(std::string(op) + ": dtype mismatch: " + a.str() +
                                         " and " + b.str() + " (cast one, or use autocast)"));
}

}  // namespace

Tensor linear(const Tensor& src_in, const Tensor& weights_in, const Tensor& bias_in) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::linear, {src_in, weights_in, bias_in});
  const Tensor &src = in[0], &weights = in[1], &bias = in[2];
  if (src.dim() != 2 || weights.dim() != 2 || src.size(1) != weights.size(1))
    throw Error(Status::invalid_argument("linear: src " + shape_str(src.shape()) + " and weights " +
                                         shape_str(weights.shape()) +
                                         " do not fit (expected src [N, K], weights [O, K])"));
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weights.size(0)))
    throw Error(Status::invalid_argument("linear: bias " + shape_str(bias.shape()) +
                                         " does not match weights " + shape_str(weights.shape()) +
                                         " (expected [" + std::to_string(weights.size(0)) + "])"));
  check_same_dtype("linear", src, weights);
  check_same_dtype("linear", src, bias);
  Tensor dst = ops_detail::dispatch(
      "linear", src.dtype(), [&] { return onednn::linear_forward(src, weights, bias); },
      [&] { return ref::linear_forward(src, weights, bias); });
  if (any_requires_grad({&src, &weights, &bias})) {
    const bool need_src = src.requires_grad();
    const bool need_w = weights.requires_grad() || (bias.defined() && bias.requires_grad());
    Tensor s = need_w ? src.detach() : Tensor();
    Tensor w = need_src ? weights.detach() : Tensor();
    const bool with_bias = bias.defined();
    record_op(dst, "linear", {&src, &weights, &bias},
              [s, w, with_bias](const Tensor& diff_dst) {
                std::vector<Tensor> g(3);
                const DType dt = diff_dst.dtype();
                if (w.defined())
                  g[0] = ops_detail::dispatch(
                      "linear_backward_data", dt,
                      [&] { return onednn::linear_backward_data(diff_dst, w); },
                      [&] { return ref::linear_backward_data(diff_dst, w); });
                if (s.defined()) {
                  MemoryCategoryGuard mg(MemoryCategory::gradients);  // weight gradients
                  WeightGrads wg = ops_detail::dispatch(
                      "linear_backward_weights", dt,
                      [&] { return onednn::linear_backward_weights(s, diff_dst, with_bias); },
                      [&] { return ref::linear_backward_weights(s, diff_dst, with_bias); });
                  // f32 as oneDNN accumulated them: an autocast copy's cast node passes
                  // them to the f32 parameter unrounded; any other bf16 input gets them
                  // rounded by the engine (autograd/engine.cpp, conform).
                  g[1] = wg.diff_weights;
                  g[2] = wg.diff_bias;
                }
                return g;
              });
  }
  return dst;
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const auto in = ops_detail::autocast_inputs(a_in.dim() == 3 && b_in.dim() == 3 ? amp::OpId::bmm : amp::OpId::matmul,
                                   {a_in, b_in});
  const Tensor &a = in[0], &b = in[1];
  if (a.dim() < 2 || b.dim() < 2 || a.size(-1) != b.size(-2))
    throw Error(Status::invalid_argument("matmul: shapes " + shape_str(a.shape()) + " and " +
                                         shape_str(b.shape()) +
                                         " do not fit (expected [.., M, K] x [.., K, N])"));
  check_same_dtype("matmul", a, b);
  Tensor dst = ops_detail::dispatch("matmul", a.dtype(),
                                    [&] { return onednn::matmul(a, b, false, false); },
                                    [&] { return ref::matmul(a, b, false, false); });
  if (any_requires_grad({&a, &b})) {
    Tensor ca = b.requires_grad() ? a.detach() : Tensor();
    Tensor cb = a.requires_grad() ? b.detach() : Tensor();
    record_op(dst, "matmul", {&a, &b}, [ca, cb, sa = a.shape(), sb = b.shape()](const Tensor& g) {
      std::vector<Tensor> r(2);
      const DType dt = g.dtype();
      // diff_a = g x b^T ; diff_b = a^T x g (summed over broadcast batch dims)
      if (cb.defined()) {
        Tensor ga = ops_detail::dispatch("matmul_backward", dt,
                                         [&] { return onednn::matmul(g, cb, false, true); },
                                         [&] { return ref::matmul(g, cb, false, true); });
        r[0] = ga.shape() == sa ? ga : reshape(sum(ga, {0}, false), sa);
      }
      if (ca.defined()) {
        Tensor gb = ops_detail::dispatch("matmul_backward", dt,
                                         [&] { return onednn::matmul(ca, g, true, false); },
                                         [&] { return ref::matmul(ca, g, true, false); });
        r[1] = gb.shape() == sb ? gb : reshape(sum(gb, {0}, false), sb);
      }
      return r;
    });
  }
  return dst;
}

}  // namespace mixprec
