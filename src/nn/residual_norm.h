// nn/residual_norm.h: the residual stream's add and the LayerNorm that reads it, as the
// transformer models call them: one add_layer_norm (mixprec/ops/ops_fused.h) where it applies,
// the composition add + LayerNorm where the LayerNorm module has an autocast override of its
// own (a model file's `precision: fp32`), which the composition honours through operator().
#pragma once

#include "mixprec/nn/nn.h"
#include "mixprec/ops/ops_fused.h"

namespace mixprec::nn {

// sum = x + branch (x when branch is undefined), normed = ln(sum). gemm_next: normed feeds
// a linear layer, so it is produced in the dtype that layer's autocast row would cast it to
// (bf16 under bf16 autocast), in the same pass: the values the cast would give.
ResidualLayerNorm residual_norm(const Tensor& x, const Tensor& branch, LayerNorm& ln, bool gemm_next);

}  // namespace mixprec::nn
