// activation.cpp: relu (keep policy: runs in its input dtype).
#include "autograd/node.h"
#include "mixprec/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

Tensor relu(const Tensor& src) {
  if (!is_floating(src.dtype()))
    throw Error(Status::invalid_argument("relu: needs a floating tensor, got " + src.str()));
  Tensor dst = ops_detail::dispatch("relu", src.dtype(), [&] { return onednn::relu_forward(src); },
                                    [&] { return ref::relu_forward(src); });
  if (any_requires_grad({&src})) {
    // Backward needs only the output's sign pattern; the input can be freed.
    record_op(dst, "relu", {&src}, [d = dst.detach()](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch(
          "relu_backward", d.dtype(), [&] { return onednn::relu_backward(diff_dst, d); },
          [&] { return ref::relu_backward(diff_dst, d); })};
    });
  }
  return dst;
}

}  // namespace mixprec
