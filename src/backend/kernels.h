// kernels.h: the kernel contracts, and the one header through which src/ops reaches a
// backend. backend/ref (naive loops, float64 accumulation: the independent reference) and
// backend/onednn (the production path) both implement every function of
// MIXPREC_DECLARE_KERNELS with the same signature, in namespaces mixprec::backend::ref and
// mixprec::backend::onednn; src/ops chooses which one runs (ops/dispatch.h). The
// hand-written vector kernels of backend/cpu (namespace mixprec::backend::cpu) are
// declared in their own headers, included at the end of this one, each with its contract.
//
// Conventions (oneDNN's argument names):
// - src/dst: forward input/output; diff_*: gradients. Shapes are logical (NCHW, [N, K]).
// - Inputs may be any dense layout (contiguous or channels-last); outputs are new tensors,
//   dense, in the layout the backend prefers (ref: contiguous).
// - Floating dtypes only; every input of one call has the same dtype; the output has that
//   dtype too, unless a function says otherwise. Accumulation is at least f32 (ref: f64).
// - An undefined Tensor means "absent" (e.g. no bias).
// - onednn functions throw mixprec::Error with StatusCode::unimplemented when oneDNN has
//   no kernel for the dtype; the ops layer then falls back to ref (once-noted, counted by
//   ref_fallback_count() in ops/dispatch.h).
// - f16 on onednn is emulated (backend/onednn/half_emulation.h): oneDNN 2.6.3 has no f16
//   kernel on CPU, so f16 inputs are widened exactly to f32 (convert_elements, F16C), the
//   f32 primitive accumulates in f32, and outputs are rounded once to f16: bit-identical to
//   the f32 kernel on the same values followed by a cast, as a tensor core computes. bf16
//   takes the same route on CPUs without AVX-512, where oneDNN has no bf16 kernels.
// - Exception to "output dtype = input dtype": onednn's conv2d/linear backward_weights
//   return diff_weights/diff_bias in f32 for bf16 and f16 inputs (the f32 accumulator,
//   unrounded). Autograd casts a gradient to its input's dtype, so an f16/bf16 weight still
//   receives it rounded once, exactly as if the kernel had written 16 bits.
#pragma once
#include <optional>
#include <vector>

#include "backend/dispatch_log.h"
#include "backend/kernel_params.h"
#include "mixprec/core/tensor.h"

#define MIXPREC_DECLARE_KERNELS                                                             \
  /* conv: src [N,C,H,W], weights [O,C,KH,KW], bias [O] -> dst [N,O,OH,OW] */               \
  Tensor conv2d_forward(const Tensor& src, const Tensor& weights, const Tensor& bias,      \
                        const Conv2dParams& p);                                             \
  /* diff_dst [N,O,OH,OW], weights -> diff_src with shape src_shape */                      \
  Tensor conv2d_backward_data(const Tensor& diff_dst, const Tensor& weights,              \
                              const Shape& src_shape, const Conv2dParams& p);               \
  /* -> {diff_weights [O,C,KH,KW], diff_bias [O] (undefined if !with_bias)} */              \
  WeightGrads conv2d_backward_weights(const Tensor& src, const Tensor& diff_dst,            \
                                      const Shape& weights_shape, bool with_bias,           \
                                      const Conv2dParams& p);                               \
  /* linear (PyTorch layout): src [N,K], weights [O,K], bias [O] -> dst [N,O] */            \
  Tensor linear_forward(const Tensor& src, const Tensor& weights, const Tensor& bias);      \
  Tensor linear_backward_data(const Tensor& diff_dst, const Tensor& weights);               \
  WeightGrads linear_backward_weights(const Tensor& src, const Tensor& diff_dst,            \
                                      bool with_bias);                                      \
  /* matmul: a [B..,M,K] x b [B..,K,N] -> [B..,M,N]; batch dims equal or 1 (broadcast);    \
     2-D and 3-D at least. trans_a/trans_b: use the transpose of the last two dims. */     \
  Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);             \
  Tensor relu_forward(const Tensor& src);                                                   \
  /* uses dst (the forward output): diff_src = diff_dst where dst > 0 */                    \
  Tensor relu_backward(const Tensor& diff_dst, const Tensor& dst);                          \
  /* max pooling. workspace: backend-private data for backward (argmax); pass it back */    \
  PoolResult max_pool2d_forward(const Tensor& src, const Pool2dParams& p);                  \
  Tensor max_pool2d_backward(const Tensor& diff_dst, const Tensor& workspace,               \
                             const Shape& src_shape, const Pool2dParams& p);                \
  Tensor avg_pool2d_forward(const Tensor& src, const Pool2dParams& p);                      \
  Tensor avg_pool2d_backward(const Tensor& diff_dst, const Shape& src_shape,                \
                             const Pool2dParams& p);                                        \
  /* softmax / log_softmax over `axis` (non-negative); backward uses dst */                  \
  Tensor softmax_forward(const Tensor& src, int64_t axis);                                  \
  Tensor softmax_backward(const Tensor& diff_dst, const Tensor& dst, int64_t axis);        \
  Tensor log_softmax_forward(const Tensor& src, int64_t axis);                              \
  Tensor log_softmax_backward(const Tensor& diff_dst, const Tensor& dst, int64_t axis);    \
  /* elementwise with numpy broadcasting; output shape is the broadcast shape */           \
  Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);                             \
  Tensor unary(UnaryOp op, const Tensor& src);                                              \
  /* reduce over `axes` (sorted, non-negative); keepdim keeps them as size 1 */             \
  Tensor reduce(ReduceOp op, const Tensor& src, const std::vector<int64_t>& axes,          \
                bool keepdim);                                                              \
  /* src * alpha + beta, elementwise */                                                     \
  Tensor linear_scale(const Tensor& src, double alpha, double beta);                        \
  /* a copy with another dtype and/or memory format (round to nearest even) */              \
  Tensor reorder(const Tensor& src, DType dtype, MemoryFormat format);

namespace mixprec::backend {

struct WeightGrads {
  Tensor diff_weights;
  Tensor diff_bias;
};

struct PoolResult {
  Tensor dst;
  Tensor workspace;
};

namespace ref {
MIXPREC_DECLARE_KERNELS
}  // namespace ref

namespace onednn {
MIXPREC_DECLARE_KERNELS
// The implementation name oneDNN picked for the last primitive created for `kind`
// (e.g. "brgconv:avx512_core_amx_bf16"), for MIXPREC_VERBOSE=dispatch.
}  // namespace onednn

}  // namespace mixprec::backend

// backend/cpu: vector kernels with their own contracts (see each header).
#include "backend/cpu/activation.h"
#include "backend/cpu/column_sum.h"
#include "backend/cpu/conv3x3_weight_grad.h"
#include "backend/cpu/conv_relu_pool.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/flash_attention.h"
#include "backend/cpu/layout.h"
#include "backend/cpu/log.h"
#include "backend/cpu/reduce_sum.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/relu.h"
#include "backend/cpu/relu_max_pool.h"
#include "backend/cpu/residual_layer_norm.h"
#include "backend/cpu/softmax_rows.h"

// backend/ref: float64 references for the ops without a single contract function (the op
// registry, ops/registry.h, checks every op against them).
#include "backend/ref/op_reference.h"
