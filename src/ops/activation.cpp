// activation.cpp: relu (keep policy: runs in its input dtype). Dense f32/bf16/f16 tensors run
// on backend/cpu's relu, which keeps NaN as PyTorch does (oneDNN 2.6's maps NaN to 0 and
// would hide a diverged model); other layouts go to oneDNN, f64 to ref.
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

Tensor relu(const Tensor& src_in) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::relu, src_in);
  if (!is_floating(src.dtype()))
    throw Error(Status::invalid_argument("relu: needs a floating tensor, got " + src.str()));
  const bool own = backend::cpu::relu_supported(src) && ops_detail::onednn_enabled_for(src.dtype());
  Tensor dst;
  if (own) {
    dst = backend::cpu::relu_forward(src);
    if (ops_detail::verbose_dispatch()) ops_detail::note_dispatch("relu", src.dtype(), "cpu (NaN-propagating)");
  } else {
    dst = ops_detail::dispatch("relu", src.dtype(), [&] { return onednn::relu_forward(src); },
                               [&] { return ref::relu_forward(src); });
  }
  if (any_requires_grad({&src})) {
    // Backward needs only the output's sign pattern; the input can be freed.
    record_op(dst, "relu", {&src}, [d = dst.detach(), own](const Tensor& diff_dst) {
      if (own && diff_dst.dtype() == d.dtype()) return std::vector<Tensor>{backend::cpu::relu_backward(diff_dst, d)};
      return std::vector<Tensor>{ops_detail::dispatch(
          "relu_backward", d.dtype(), [&] { return onednn::relu_backward(diff_dst, d); },
          [&] { return ref::relu_backward(diff_dst, d); })};
    });
  }
  return dst;
}

}  // namespace mixprec
