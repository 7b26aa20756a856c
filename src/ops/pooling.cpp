// pooling.cpp: max and average pooling (keep policy), forward and backward. Max pooling's
// backward must run on the backend whose forward produced the workspace (argmax).
#include "autograd/node.h"
#include "mixprec/ops/ops.h"
#include "ops/autocast_hook.h"
#include "ops/conv_common.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

namespace {

// PyTorch's rules, per axis: kernel >= 1, stride >= 1, 0 <= padding <= kernel / 2, and at
// least one output position; a bad value is named with its axis and its pair.
Pool2dParams pool_params(const char* op, const Tensor& src, Axes2 kernel, Axes2 stride, Axes2 padding) {
  if (src.dim() != 4)
    throw Error(Status::invalid_argument(std::string(op) + ": expected src [N, C, H, W], got " +
                                         shape_str(src.shape())));
  auto fail = [&](size_t axis, const std::string& what) {
    throw Error(Status::invalid_argument(std::string(op) + ": " + what + " along " + ops_detail::axis_name(axis) +
                                         " (kernel_size " + ops_detail::axes_str(kernel) + ", stride " +
                                         ops_detail::axes_str(stride) + ", padding " + ops_detail::axes_str(padding) +
                                         ")"));
  };
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t k = kernel[axis], s = stride[axis], pad = padding[axis];
    if (k < 1) fail(axis, "kernel_size " + std::to_string(k) + " (expected >= 1)");
    if (s < 1) fail(axis, "stride " + std::to_string(s) + " (expected >= 1)");
    if (pad < 0) fail(axis, "padding " + std::to_string(pad) + " (expected >= 0)");
    if (pad * 2 > k) fail(axis, "padding " + std::to_string(pad) + " is more than half the kernel_size " + std::to_string(k));
    const int64_t in = src.size(int64_t(2 + axis));
    if (k > in + 2 * pad)  // no output position (PyTorch's "Output size is too small")
      fail(axis, "kernel_size " + std::to_string(k) + " is larger than the padded input's " +
                     std::to_string(in + 2 * pad) + " (src " + shape_str(src.shape()) + ")");
  }
  return {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1]};
}

// The int form's arguments as pairs; its stride -1 (PyTorch's None) is the kernel's.
Axes2 both(int64_t v) { return {v, v}; }
Axes2 stride_or_kernel(int64_t stride, int64_t kernel) { return both(stride < 0 ? kernel : stride); }

}  // namespace

Tensor max_pool2d(const Tensor& src_in, Axes2 kernel, Axes2 stride, Axes2 padding) {
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

Tensor avg_pool2d(const Tensor& src_in, Axes2 kernel, Axes2 stride, Axes2 padding) {
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

Tensor max_pool2d(const Tensor& src, int64_t kernel, int64_t stride, int64_t padding) {
  return max_pool2d(src, both(kernel), stride_or_kernel(stride, kernel), both(padding));
}

Tensor avg_pool2d(const Tensor& src, int64_t kernel, int64_t stride, int64_t padding) {
  return avg_pool2d(src, both(kernel), stride_or_kernel(stride, kernel), both(padding));
}

}  // namespace mixprec
