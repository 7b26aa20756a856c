// backend/onednn/conv_util.cpp: convolution geometry and the forward primitive_desc.
#include "backend/onednn/conv_util.h"

#include "backend/onednn/memory_desc.h"

namespace mixprec::backend::onednn {
namespace {
[[noreturn]] void bad(const std::string& msg) { throw Error(Status::invalid_argument(msg)); }
}  // namespace

ConvGeom conv_geometry(const char* op, const Shape& src, const Shape& weights,
                       const Conv2dParams& p) {
  if (src.size() != 4) bad(std::string(op) + ": src " + shape_str(src) + " must be 4-D (NCHW)");
  if (weights.size() != 4)
    bad(std::string(op) + ": weights " + shape_str(weights) + " must be 4-D (OIHW)");
  if (weights[1] != src[1])
    bad(std::string(op) + ": weights " + shape_str(weights) + " expect " +
        std::to_string(weights[1]) + " input channels, src " + shape_str(src) + " has " +
        std::to_string(src[1]));
  if (p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0)
    bad(std::string(op) + ": stride (" + std::to_string(p.stride_h) + ", " +
        std::to_string(p.stride_w) + ") must be >= 1 and pad (" + std::to_string(p.pad_h) +
        ", " + std::to_string(p.pad_w) + ") >= 0");
  ConvGeom g{src[0], src[1], src[2], src[3], weights[0], weights[2], weights[3], 0, 0, {}, {}, {}};
  if (g.KH > g.H + 2 * p.pad_h || g.KW > g.W + 2 * p.pad_w)
    bad(std::string(op) + ": kernel " + std::to_string(g.KH) + "x" + std::to_string(g.KW) +
        " is larger than the padded input of src " + shape_str(src));
  g.OH = conv_out_size(g.H, g.KH, p.stride_h, p.pad_h);
  g.OW = conv_out_size(g.W, g.KW, p.stride_w, p.pad_w);
  g.strides = {p.stride_h, p.stride_w};
  g.pad_l = {p.pad_h, p.pad_w};
  // Symmetric padding, as PyTorch passes it to oneDNN: oneDNN checks
  // (H - KH + pl + pr) / s + 1 == OH with floor division, which is PyTorch's rule, and the
  // rows floor mode drops are simply never read.
  g.pad_r = g.pad_l;
  return g;
}

void add_geometry(PrimKey& key, const ConvGeom& g) {
  key.add(g.O).add(g.C).add(g.KH).add(g.KW);
  for (int i = 0; i < 2; ++i) key.add(g.strides[i]).add(g.pad_l[i]).add(g.pad_r[i]);
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(const ConvGeom& g,
                                                          const dnnl_md& src_md,
                                                          const dnnl_md& dst_md, DType dt,
                                                          bool with_bias) {
  const dnnl_md weights_md = md_any(g.weights_shape(), dt);
  using fwd = dnnl::convolution_forward;
  auto desc = with_bias
                  ? fwd::desc(dnnl::prop_kind::forward_training,
                              dnnl::algorithm::convolution_direct, src_md, weights_md,
                              md_of(Shape{g.O}, dt, MemoryFormat::contiguous), dst_md, g.strides,
                              g.pad_l, g.pad_r)
                  : fwd::desc(dnnl::prop_kind::forward_training,
                              dnnl::algorithm::convolution_direct, src_md, weights_md, dst_md,
                              g.strides, g.pad_l, g.pad_r);
  return fwd::primitive_desc(desc, cpu_engine());
}

}  // namespace mixprec::backend::onednn
