// fused_relu_pool.cpp: relu_max_pool2d (keep policy), forward and backward through the
// fused CPU kernel (backend/cpu/relu_max_pool.h). Backward keeps only the argmax (4 bits
// per output for k <= 3, else 1 byte): neither relu's output nor the pooling input stays
// alive for it.
#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops.h"
#include "mixprec/ops_fused.h"
#include "ops/dispatch.h"

namespace mixprec {

namespace {
bool fused_dtype(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }
}  // namespace

Tensor relu_max_pool2d(const Tensor& src_in, int64_t kernel) {
  // The composition's casts: relu's row, then max_pool2d's (both keep by default).
  const Tensor src =
      ops_detail::autocast_input(amp::OpId::max_pool2d, ops_detail::autocast_input(amp::OpId::relu, src_in));
  if (!src.defined() || src.dim() != 4 || !is_floating(src.dtype()))
    throw Error(Status::invalid_argument("relu_max_pool2d: expected a floating src [N, C, H, W], got " +
                                         (src.defined() ? src.str() : std::string("undefined"))));
  if (kernel < 1 || kernel > src.size(2) || kernel > src.size(3))
    throw Error(Status::invalid_argument("relu_max_pool2d: kernel " + std::to_string(kernel) +
                                         " must be >= 1 and fit src " + shape_str(src.shape())));
  // f64 (gradchecks), MIXPREC_BACKEND=ref and windows too large for a byte of argmax run
  // the composition, which is the definition this op must match.
  if (!fused_dtype(src.dtype()) || !ops_detail::onednn_enabled_for(src.dtype()) ||
      kernel > 15) {
    if (ops_detail::verbose_dispatch())
      ops_detail::note_dispatch("relu_max_pool2d", src.dtype(), "relu + max_pool2d (unfused)");
    ops_detail::AutocastOff cast_already;  // src is cast as the composition casts
    return max_pool2d(relu(src), kernel);
  }
  if (ops_detail::verbose_dispatch())
    ops_detail::note_dispatch("relu_max_pool2d", src.dtype(), "cpu fused kernel");
  backend::cpu::ReluMaxPoolResult r = backend::cpu::relu_max_pool2d_forward(src, kernel);
  if (any_requires_grad({&src})) {
    record_op(r.dst, "relu_max_pool2d", {&src},
              [arg = r.argmax, format = r.format, src_shape = src.shape(), kernel](const Tensor& diff_dst) {
                return std::vector<Tensor>{
                    backend::cpu::relu_max_pool2d_backward(diff_dst, arg, src_shape, kernel, format)};
              });
  }
  return r.dst;
}

}  // namespace mixprec
