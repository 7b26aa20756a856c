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
  if (p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0 || p.dil_h < 1 || p.dil_w < 1 ||
      p.groups < 1)
    bad(std::string(op) + ": stride (" + std::to_string(p.stride_h) + ", " +
        std::to_string(p.stride_w) + ") must be >= 1, pad (" + std::to_string(p.pad_h) +
        ", " + std::to_string(p.pad_w) + ") >= 0, dilation (" + std::to_string(p.dil_h) + ", " +
        std::to_string(p.dil_w) + ") and groups (" + std::to_string(p.groups) + ") >= 1");
  if (weights[1] * p.groups != src[1] || weights[0] % p.groups != 0)
    bad(std::string(op) + ": weights " + shape_str(weights) + " with groups " + std::to_string(p.groups) +
        " expect " + std::to_string(weights[1] * p.groups) + " input channels (and output channels divisible by " +
        "the groups), src " + shape_str(src) + " has " + std::to_string(src[1]));
  ConvGeom g{src[0], src[1], src[2], src[3], weights[0], weights[2], weights[3], 0, 0, p.groups, {}, {}, {}, {}};
  if (p.dil_h * (g.KH - 1) + 1 > g.H + 2 * p.pad_h || p.dil_w * (g.KW - 1) + 1 > g.W + 2 * p.pad_w)
    bad(std::string(op) + ": kernel " + std::to_string(g.KH) + "x" + std::to_string(g.KW) +
        " (dilation " + std::to_string(p.dil_h) + ", " + std::to_string(p.dil_w) +
        ") is larger than the padded input of src " + shape_str(src));
  g.OH = conv_out_size(g.H, g.KH, p.stride_h, p.pad_h, p.dil_h);
  g.OW = conv_out_size(g.W, g.KW, p.stride_w, p.pad_w, p.dil_w);
  g.strides = {p.stride_h, p.stride_w};
  g.dilates = {p.dil_h - 1, p.dil_w - 1};
  g.pad_l = {p.pad_h, p.pad_w};
  // Symmetric padding, as PyTorch passes it to oneDNN: oneDNN checks
  // (H - KH + pl + pr) / s + 1 == OH with floor division, which is PyTorch's rule, and the
  // rows floor mode drops are simply never read.
  g.pad_r = g.pad_l;
  return g;
}

dnnl_md weights_md(const Tensor& w, int64_t groups) {
  if (groups == 1) return md_of(w);
  const Shape& st = w.strides();
  const int64_t og = w.size(0) / groups;
  return dnnl_md(dnnl::memory::dims{groups, og, w.size(1), w.size(2), w.size(3)}, to_dnnl(w.dtype()),
                 dnnl::memory::dims{st[0] * og, st[0], st[1], st[2], st[3]});
}

void add_geometry(PrimKey& key, const ConvGeom& g) {
  key.add(g.O).add(g.C).add(g.KH).add(g.KW).add(g.G);
  for (int i = 0; i < 2; ++i) key.add(g.strides[i]).add(g.dilates[i]).add(g.pad_l[i]).add(g.pad_r[i]);
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(const ConvGeom& g,
                                                          const dnnl_md& src_md,
                                                          const dnnl_md& dst_md, DType dt,
                                                          bool with_bias) {
  const dnnl_md weights_md = md_any(g.weights_dims(), dt);
  using fwd = dnnl::convolution_forward;
  auto desc = with_bias
                  ? fwd::desc(dnnl::prop_kind::forward_training,
                              dnnl::algorithm::convolution_direct, src_md, weights_md,
                              md_of(Shape{g.O}, dt, MemoryFormat::contiguous), dst_md, g.strides,
                              g.dilates, g.pad_l, g.pad_r)
                  : fwd::desc(dnnl::prop_kind::forward_training,
                              dnnl::algorithm::convolution_direct, src_md, weights_md, dst_md,
                              g.strides, g.dilates, g.pad_l, g.pad_r);
  return fwd::primitive_desc(desc, cpu_engine());
}

}  // namespace mixprec::backend::onednn
