// backend/onednn/conv_util.h: geometry shared by the three convolution kernels.
// Letters: N batch, C input channels, H/W input size, O output channels, KH/KW kernel,
// OH/OW output size.
#pragma once
#include "backend/kernel_params.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"

namespace mixprec::backend::onednn {

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW;
  dnnl::memory::dims strides, pad_l, pad_r;
  Shape src_shape() const { return {N, C, H, W}; }
  Shape weights_shape() const { return {O, C, KH, KW}; }
  Shape dst_shape() const { return {N, O, OH, OW}; }
};

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
