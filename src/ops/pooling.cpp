// pooling.cpp: max and average pooling (keep policy), forward and backward. Max pooling's
// backward must run on the backend whose forward produced the workspace (argmax).
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

Pool2dParams pool_params(const char* op, const Tensor& src, int64_t kernel, int64_t stride,
                         int64_t padding) {
  if (src.dim() != 4)
    throw Error(Status::invalid_argument(std::string(op) + ": expected src [N, C, H, W], got " +
                                         shape_str(src.shape())));
  if (stride < 0) stride = kernel;  // PyTorch: stride defaults to the kernel size
  if (kernel < 1 || stride < 1 || padding < 0 || padding * 2 > kernel)
    throw Error(Status::invalid_argument(
        std::string(op) + ": kernel " + std::to_string(kernel) + ", stride " + std::to_string(stride) +
        ", padding " + std::to_string(padding) +
        " are invalid (kernel >= 1, stride >= 1, 0 <= padding <= kernel / 2)"));
  if (conv_out_size(src.size(2), kernel, stride, padding) < 1 ||
      conv_out_size(src.size(3), kernel, stride, padding) < 1)
    throw Error(Status::invalid_argument(std::string(op) + ": kernel " + std::to_string(kernel) +
                                         " is larger than the padded input " + shape_str(src.shape())));
  return {kernel, kernel, stride, stride, padding, padding};
}

}  // namespace

Tensor max_pool2d(const Tensor& src_in, int64_t kernel, int64_t stride, int64_t padding) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::max_pool2d, src_in);
  const Pool2dParams p = pool_params("max_pool2d", src, kernel, stride, padding);
  bool on_onednn = false;
  PoolResult r = ops_detail::dispatch(
      "max_pool2d", src.dtype(),
      [&] {
        PoolResult pr = onednn::max_pool2d_forward(src, p);
        on_onednn = true;
        return pr;
      },
      [&] { return ref::max_pool2d_forward(src, p); });
  if (any_requires_grad({&src})) {
    record_op(r.dst, "max_pool2d", {&src},
              [ws = r.workspace, src_shape = src.shape(), p, on_onednn](const Tensor& diff_dst) {
                // The forward's backend, whose private workspace (argmax) this reads.
                if (ops_detail::dispatch_verbose())
                  ops_detail::note_dispatch("max_pool2d_backward", diff_dst.dtype(), on_onednn ? "onednn" : "ref");
                Tensor g = on_onednn ? onednn::max_pool2d_backward(diff_dst, ws, src_shape, p)
                                     : ref::max_pool2d_backward(diff_dst, ws, src_shape, p);
                return std::vector<Tensor>{g};
              });
  }
  return r.dst;
}

Tensor avg_pool2d(const Tensor& src_in, int64_t kernel, int64_t stride, int64_t padding) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::avg_pool2d, src_in);
  const Pool2dParams p = pool_params("avg_pool2d", src, kernel, stride, padding);
  Tensor dst = ops_detail::dispatch("avg_pool2d", src.dtype(),
                                    [&] { return onednn::avg_pool2d_forward(src, p); },
                                    [&] { return ref::avg_pool2d_forward(src, p); });
  if (any_requires_grad({&src})) {
    record_op(dst, "avg_pool2d", {&src}, [src_shape = src.shape(), p](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch(
          "avg_pool2d_backward", diff_dst.dtype(),
          [&] { return onednn::avg_pool2d_backward(diff_dst, src_shape, p); },
          [&] { return ref::avg_pool2d_backward(diff_dst, src_shape, p); })};
    });
  }
  return dst;
}

}  // namespace mixprec
