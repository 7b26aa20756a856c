// nn/residual_norm.cpp: see residual_norm.h.
#include "nn/residual_norm.h"

#include "mixprec/amp/amp.h"
#include "mixprec/ops/ops.h"

namespace mixprec::nn {

ResidualLayerNorm residual_norm(const Tensor& x, const Tensor& branch, LayerNorm& ln, bool gemm_next) {
  if (ln.autocast_override()) {
    const Tensor sum = branch.defined() ? add(x, branch) : x;
    return {sum, ln(sum)};
  }
  // linear's row under autocast: lower casts any floating input but f64 to the autocast
  // dtype (src/amp/autocast.cpp); layer_norm's output is f32 there (its fp32 row).
  std::optional<DType> to;
  if (gemm_next && amp::is_autocast_enabled() && amp::policy_for(amp::OpId::linear) == amp::CastPolicy::lower &&
      x.dtype() != DType::f64)
    to = amp::autocast_dtype();
  return add_layer_norm(x, branch, ln.normalized_shape, ln.weight, ln.bias, ln.eps, to);
}

}  // namespace mixprec::nn
