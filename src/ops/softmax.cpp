// softmax.cpp: softmax and log_softmax (fp32 policy under autocast), forward and backward.
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

int64_t normalize_dim(const char* op, const Tensor& src, int64_t dim) {
  const int64_t k = dim < 0 ? dim + src.dim() : dim;
  if (k < 0 || k >= src.dim())
    throw Error(Status::invalid_argument(std::string(op) + ": dim " + std::to_string(dim) +
                                         " out of range for " + src.str()));
  if (!is_floating(src.dtype()))
    throw Error(Status::invalid_argument(std::string(op) + ": needs a floating tensor, got " + src.str()));
  return k;
}

}  // namespace

Tensor softmax(const Tensor& src_in, int64_t dim) {
  const Tensor src = ops_detail::autocast_inputs(amp::OpId::softmax, {src_in})[0];
  const int64_t axis = normalize_dim("softmax", src, dim);
  Tensor dst = ops_detail::dispatch("softmax", src.dtype(),
                                    [&] { return onednn::softmax_forward(src, axis); },
                                    [&] { return ref::softmax_forward(src, axis); });
  if (any_requires_grad({&src})) {
    record_op(dst, "softmax", {&src}, [d = dst.detach(), axis](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch(
          "softmax_backward", d.dtype(),
          [&] { return onednn::softmax_backward(diff_dst, d, axis); },
          [&] { return ref::softmax_backward(diff_dst, d, axis); })};
    });
  }
  return dst;
}

Tensor log_softmax(const Tensor& src_in, int64_t dim) {
  const Tensor src = ops_detail::autocast_inputs(amp::OpId::log_softmax, {src_in})[0];
  const int64_t axis = normalize_dim("log_softmax", src, dim);
  Tensor dst = ops_detail::dispatch("log_softmax", src.dtype(),
                                    [&] { return onednn::log_softmax_forward(src, axis); },
                                    [&] { return ref::log_softmax_forward(src, axis); });
  if (any_requires_grad({&src})) {
    record_op(dst, "log_softmax", {&src}, [d = dst.detach(), axis](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch(
          "log_softmax_backward", d.dtype(),
          [&] { return onednn::log_softmax_backward(diff_dst, d, axis); },
          [&] { return ref::log_softmax_backward(diff_dst, d, axis); })};
    });
  }
  return dst;
}

}  // namespace mixprec
