// backend/onednn/conv_util.h: geometry shared by the three convolution kernels.
// Letters: N batch, C input channels, H/W input size, O output channels, KH/KW kernel,
// OH/OW output size, G groups.
#pragma once
#include "backend/kernel_params.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"

namespace mixprec::backend::onednn {

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, G;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;  // dilates: oneDNN's, dilation - 1
  Shape src_shape() const { return {N, C, H, W}; }
  // PyTorch's [O, C / G, KH, KW]; oneDNN's grouped weights are [G, O / G, C / G, KH, KW], the
  // same memory (weights_md).
  Shape weights_shape() const { return {O, C / G, KH, KW}; }
  Shape weights_dims() const {
    return G == 1 ? weights_shape() : Shape{G, O / G, C / G, KH, KW};
  }
  Shape dst_shape() const { return {N, O, OH, OW}; }
};

// The memory desc of a weights tensor [O, C / G, KH, KW] (any strides) as oneDNN's weights of
// G groups: for G > 1, the 5-D view [G, O / G, C / G, KH, KW] of the same memory.
dnnl_md weights_md(const Tensor& w, int64_t groups);

// Validates shapes (Error(invalid_argument) naming op and fields) and derives the output.
ConvGeom conv_geometry(const char* op, const Shape& src, const Shape& weights,
                       const Conv2dParams& p);

// Appends the geometry words to a cache key.
void add_geometry(PrimKey& key, const ConvGeom& g);

// The forward primitive_desc every conv primitive is built from (backward ones need it as
// a hint). src/dst descs are plain strided; weights use format_tag::any.
dnnl::convolution_forward::primitive_desc conv_forward_pd(const ConvGeom& g,
                                                          const dnnl_md& src_md,
                                                          const dnnl_md& dst_md, DType dt,
                                                          bool with_bias);

}  // namespace mixprec::backend::onednn
