// backend/onednn/conv.cpp: 2-D convolution forward, backward data, backward weights, with
// PyTorch's groups (oneDNN's grouped weights, a 5-D view of the same memory: conv_util.h)
// and dilation (oneDNN counts it from 0).
//
// Layout. Activations run channels-last (NHWC) for both f32 and bf16, and outputs are
// returned channels-last (Tensor::empty(..., MemoryFormat::channels_last)):
// - bf16: oneDNN's AMX kernels want nhwc (limits.md §2; nchw falls to x64:gemm:jit, 4x
//   slower).
// - f32: format_tag::any picks nChw16c, which a Tensor cannot hold, so the choice is
//   between plain nhwc, plain nchw and blocked + reorders around every call. Measured with
//   a throwaway oneDNN program (seed CNN, batch 256, 2 threads, quiet machine, ms, median
//   of 7; weights format any; "blocked" = nchw->nChw16c reorder in, back out, src kept
//   blocked for bwd_weights, which flatters it):
//                          fwd    bwd_weights  bwd_data   sum
//     conv2 32->64 16x16  nhwc   11.3   15.3   16.0   42.6  (brgconv / jit:avx512_core)
//                         blocked 16.5  25.6   24.3   66.4  (jit:avx512_core + reorders)
//                         nchw   25.7   29.6   28.4   83.6  (x64:gemm:jit)
//     conv1 3->32 32x32   nhwc    4.4    8.5   14.8   27.7
//                         blocked  6.9   9.3   23.0   39.2
//                         nchw    8.8   21.3   ref:any (seconds; never usable)
//   A second round gave conv2 nhwc 56.9 / blocked 60.4 / nchw 101; under heavy load from
//   other processes (5-10x slower overall) the order nhwc <= blocked < nchw held in all 6
//   rounds at 1 and 2 threads. So f32 runs nhwc too.
// - An NCHW input (the data loader's) is reordered to nhwc first (0.13 ms for the seed
//   CNN's f32 input): src nchw with dst nhwc falls to ref:any in f32 for fwd and
//   bwd_weights (measured).
// Weights arrive in PyTorch's OIHW; the primitive picks its own layout (format any) and the
// reorder is cached per (buffer, version) by weights_cache.h.
//
// Precision: bf16 src/weights -> bf16 dst, f32 accumulation inside oneDNN. f16 is emulated
// on the f32 primitives (half_emulation.h). Backward weights
// returns diff_weights and diff_bias in f32 for bf16 inputs (oneDNN accumulates the
// reduction over N*OH*OW in f32 and can write it out without rounding): the gradient that
// reaches an fp32 master weight stays fp32, which is what mixed precision wants. This (with
// linear's backward weights) is the exception to kernels.h's "output dtype equals input
// dtype" rule.
#include "backend/kernels.h"
#include "backend/onednn/conv_util.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/reorder_util.h"
#include "backend/onednn/weights_cache.h"

namespace mixprec::backend::onednn {
namespace {

constexpr MemoryFormat kActLayout = MemoryFormat::channels_last;

struct ConvFwdEntry : CacheEntry {
  dnnl::convolution_forward prim;
  dnnl_md weights_md;
  dnnl::memory src, weights, bias, dst;
  std::unordered_map<int, dnnl::memory> args;
};

struct ConvBwdDataEntry : CacheEntry {
  dnnl::convolution_backward_data prim;
  dnnl_md weights_md;
  dnnl::memory diff_dst, weights, diff_src;
  std::unordered_map<int, dnnl::memory> args;
};

struct ConvBwdWeightsEntry : CacheEntry {
  dnnl::convolution_backward_weights prim;
  dnnl_md diff_weights_md;  // oneDNN's choice; reordered to OIHW f32 when it differs
  bool direct = false;      // diff_weights_md is already plain OIHW f32
  dnnl_md src_md, diff_dst_md;  // the activations' layouts the kernel reads
  bool reorder_src = false, reorder_dd = false;  // they differ from channels-last
  dnnl::memory src, diff_dst, diff_weights, diff_bias;
  std::unordered_map<int, dnnl::memory> args;
};

void check_dtype(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                 const Tensor& b) {
  if (b.defined() && a.dtype() != b.dtype())
    throw Error(Status::invalid_argument(std::string(op) + ": dtype mismatch: " + a_name + " " +
                                         dtype_name(a.dtype()) + " vs " + b_name + " " +
                                         dtype_name(b.dtype())));
}

std::string kind_name(const char* op, DType d) { return std::string(op) + " " + dtype_name(d); }

// The conv input in the layout the kernels run in (see the banner: never mixed layouts).
Tensor conv_input(const Tensor& src) { return in_format(src, kActLayout); }

}  // namespace

Tensor conv2d_forward(const Tensor& src, const Tensor& weights, const Tensor& bias,
                      const Conv2dParams& p) {
  const char* op = "conv2d_forward";
  check_dtype(op, "src", src, "weights", weights);
  check_dtype(op, "src", src, "bias", bias);
  if (is_emulated(src))
    return emulate(op, src.dtype(),
                   [&] { return conv2d_forward(widen(src), widen(weights), widen(bias), p); });
  require_compute_dtype(op, src.dtype());
  const ConvGeom g = conv_geometry(op, src.shape(), weights.shape(), p);
  if (bias.defined() && bias.shape() != Shape{g.O})
    throw Error(Status::invalid_argument(std::string(op) + ": bias " + shape_str(bias.shape()) +
                                         " must be [" + std::to_string(g.O) + "]"));
  const DType dt = src.dtype();
  Tensor dst = Tensor::empty(g.dst_shape(), dt, kActLayout);
  if (dst.numel() == 0) return dst;
  const Tensor x = conv_input(src);
  const Tensor b = bias.defined() ? in_format(bias, MemoryFormat::contiguous) : Tensor();
  const dnnl_md src_md = md_of(x, kActLayout), dst_md = md_of(dst, kActLayout);
  PrimKey key(PrimKind::conv_fwd);
  key.add(src_md).add(dst_md).add(b.defined());
  add_geometry(key, g);
  auto e = cached<ConvFwdEntry>(key, [&] {
    auto entry = std::make_shared<ConvFwdEntry>();
    try {
      auto pd = conv_forward_pd(g, src_md, dst_md, dt, b.defined());
      entry->prim = make_primitive<dnnl::convolution_forward>(pd);
      entry->impl = pd.impl_info_str();
      entry->weights_md = pd.weights_desc();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " src " + describe(x) + " weights " +
                            shape_str(weights.shape()));
    }
    entry->src = unbound_memory(src_md);
    entry->weights = unbound_memory(entry->weights_md);
    entry->dst = unbound_memory(dst_md);
    entry->args = {{DNNL_ARG_SRC, entry->src},
                   {DNNL_ARG_WEIGHTS, entry->weights},
                   {DNNL_ARG_DST, entry->dst}};
    if (b.defined()) {
      entry->bias = unbound_memory(md_of(b));
      entry->args.emplace(DNNL_ARG_BIAS, entry->bias);
    }
    dispatch_log(kind_name(op, dt), entry->impl,
                 "src " + describe(x) + " weights " + shape_str(weights.shape()));
    return entry;
  });
  const Tensor w = weights_in_layout(weights, weights_md(weights, g.G), e->weights_md);
  std::lock_guard<std::mutex> lock(e->mu);
  e->src.set_data_handle(handle_of(x));
  e->weights.set_data_handle(handle_of(w));
  if (b.defined()) e->bias.set_data_handle(handle_of(b));
  e->dst.set_data_handle(dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return dst;
}

Tensor conv2d_backward_data(const Tensor& diff_dst, const Tensor& weights, const Shape& src_shape,
                            const Conv2dParams& p) {
  const char* op = "conv2d_backward_data";
  check_dtype(op, "diff_dst", diff_dst, "weights", weights);
  if (is_emulated(diff_dst))
    return emulate(op, diff_dst.dtype(), [&] {
      return conv2d_backward_data(widen(diff_dst), widen(weights), src_shape, p);
    });
  require_compute_dtype(op, diff_dst.dtype());
  const ConvGeom g = conv_geometry(op, src_shape, weights.shape(), p);
  if (diff_dst.shape() != g.dst_shape())
    throw Error(Status::invalid_argument(std::string(op) + ": diff_dst " +
                                         shape_str(diff_dst.shape()) + " must be " +
                                         shape_str(g.dst_shape()) + " for src " +
                                         shape_str(src_shape)));
  const DType dt = diff_dst.dtype();
  Tensor diff_src = Tensor::empty(src_shape, dt, kActLayout);
  if (diff_src.numel() == 0) return diff_src;
  if (diff_dst.numel() == 0) {  // OH or OW is 0 cannot happen (kernel fits); N > 0 here
    diff_src.fill_(0.0);
    return diff_src;
  }
  const Tensor dd = in_format(diff_dst, kActLayout);
  const dnnl_md dd_md = md_of(dd, kActLayout), ds_md = md_of(diff_src, kActLayout);
  PrimKey key(PrimKind::conv_bwd_data);
  key.add(dd_md).add(ds_md);
  add_geometry(key, g);
  auto e = cached<ConvBwdDataEntry>(key, [&] {
    auto entry = std::make_shared<ConvBwdDataEntry>();
    try {
      auto hint = conv_forward_pd(g, ds_md, dd_md, dt, false);
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, ds_md,
                                                 md_any(g.weights_dims(), dt), dd_md, g.strides,
                                                 g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, cpu_engine(), hint);
      entry->prim = make_primitive<dnnl::convolution_backward_data>(pd);
      entry->impl = pd.impl_info_str();
      entry->weights_md = pd.weights_desc();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " diff_dst " + describe(dd) + " weights " +
                            shape_str(weights.shape()));
    }
    entry->diff_dst = unbound_memory(dd_md);
    entry->weights = unbound_memory(entry->weights_md);
    entry->diff_src = unbound_memory(ds_md);
    entry->args = {{DNNL_ARG_DIFF_DST, entry->diff_dst},
                   {DNNL_ARG_WEIGHTS, entry->weights},
                   {DNNL_ARG_DIFF_SRC, entry->diff_src}};
    dispatch_log(kind_name(op, dt), entry->impl,
                 "diff_dst " + describe(dd) + " weights " + shape_str(weights.shape()));
    return entry;
  });
  const Tensor w = weights_in_layout(weights, weights_md(weights, g.G), e->weights_md);
  std::lock_guard<std::mutex> lock(e->mu);
  e->diff_dst.set_data_handle(handle_of(dd));
  e->weights.set_data_handle(handle_of(w));
  e->diff_src.set_data_handle(diff_src.data());
  e->prim.execute(cpu_stream(), e->args);
  return diff_src;
}

namespace {

// src[:, :, ::stride, ::stride] cut to OH x OW, as a dense tensor in the activation layout:
// one oneDNN reorder reading src through a strided view of its own memory.
Tensor subsample(const Tensor& src, int64_t stride_h, int64_t stride_w, int64_t oh, int64_t ow) {
  const Tensor x = conv_input(src);
  const Shape& st = x.strides();
  const dnnl::memory::dims dims = {x.size(0), x.size(1), oh, ow};
  const dnnl_md view(dims, to_dnnl(x.dtype()),
                     dnnl::memory::dims{st[0], st[1], st[2] * stride_h, st[3] * stride_w});
  Tensor out = Tensor::empty({x.size(0), x.size(1), oh, ow}, x.dtype(), kActLayout);
  execute_reorder(view, handle_of(x), md_of(out, kActLayout), out.data());
  return out;
}

}  // namespace

WeightGrads conv2d_backward_weights(const Tensor& src, const Tensor& diff_dst,
                                    const Shape& weights_shape, bool with_bias,
                                    const Conv2dParams& p) {
  const char* op = "conv2d_backward_weights";
  check_dtype(op, "src", src, "diff_dst", diff_dst);
  if (is_emulated(src))  // f32 diff_weights/diff_bias, as for bf16 (half_emulation.h)
    return emulate_raw(op, src.dtype(), [&] {
      return conv2d_backward_weights(widen(src), widen(diff_dst), weights_shape, with_bias, p);
    });
  require_compute_dtype(op, src.dtype());
  const ConvGeom g = conv_geometry(op, src.shape(), weights_shape, p);
  // A strided 1x1 convolution without padding is the stride-1 one on every stride-th pixel.
  // Its weight gradient is computed that way: oneDNN 2.6's jit_1x1 backward_weights on a
  // strided channels-last input with few input channels ("rtus" path) writes past its
  // workspace and returns wrong gradients, or corrupts memory, with 2+ threads (oneDNN issue
  // #6035; resnet_golden_test's 4-channel projection shortcut met it).
  if (g.KH == 1 && g.KW == 1 && p.pad_h == 0 && p.pad_w == 0 && (p.stride_h > 1 || p.stride_w > 1)) {
    Conv2dParams unit{};  // stride 1, no padding (a 1x1 kernel has no dilation to keep)
    unit.groups = p.groups;
    return conv2d_backward_weights(subsample(src, p.stride_h, p.stride_w, g.OH, g.OW), diff_dst, weights_shape,
                                   with_bias, unit);
  }
  if (diff_dst.shape() != g.dst_shape())
    throw Error(Status::invalid_argument(std::string(op) + ": diff_dst " +
                                         shape_str(diff_dst.shape()) + " must be " +
                                         shape_str(g.dst_shape()) + " for src " +
                                         shape_str(src.shape())));
  const DType dt = src.dtype();
  constexpr DType kGradDType = DType::f32;  // see the banner: f32 for bf16 inputs too
  WeightGrads out;
  out.diff_weights = Tensor::empty(weights_shape, kGradDType);
  if (with_bias) out.diff_bias = Tensor::empty({g.O}, kGradDType);
  if (src.numel() == 0 || out.diff_weights.numel() == 0) {
    out.diff_weights.fill_(0.0);
    if (with_bias) out.diff_bias.fill_(0.0);
    return out;
  }
  const Tensor x = conv_input(src);
  const Tensor dd = in_format(diff_dst, kActLayout);
  const dnnl_md src_md = md_of(x, kActLayout), dd_md = md_of(dd, kActLayout);
  const dnnl_md dw_plain = weights_md(out.diff_weights, g.G);
  PrimKey key(PrimKind::conv_bwd_weights);
  key.add(src_md).add(dd_md).add(with_bias);
  add_geometry(key, g);
  auto e = cached<ConvBwdWeightsEntry>(key, [&] {
    auto entry = std::make_shared<ConvBwdWeightsEntry>();
    try {
      auto hint = conv_forward_pd(g, src_md, dd_md, dt, with_bias);
      using bwd = dnnl::convolution_backward_weights;
      const dnnl_md dw_any = md_any(g.weights_dims(), kGradDType);
      auto make_pd = [&](const dnnl_md& s_md, const dnnl_md& d_md) {
        auto desc = with_bias ? bwd::desc(dnnl::algorithm::convolution_direct, s_md, dw_any,
                                          md_of(Shape{g.O}, kGradDType, MemoryFormat::contiguous),
                                          d_md, g.strides, g.dilates, g.pad_l, g.pad_r)
                              : bwd::desc(dnnl::algorithm::convolution_direct, s_md, dw_any,
                                          d_md, g.strides, g.dilates, g.pad_l, g.pad_r);
        return bwd::primitive_desc(desc, cpu_engine(), hint);
      };
      bwd::primitive_desc pd = make_pd(src_md, dd_md);
      // oneDNN 2.6 has no brgemm weight gradient for f32 channels-last activations on
      // AVX-512: its jit fallback ran the seed CNN's conv2 at 56% of the f32 peak (8.5 ms),
      // the blocked layout it prefers at 90% (5.2 ms) plus 2 ms of reorders into it (Zen5,
      // 2026-11-26; docs/benchmarks.md). So an f32 weight gradient without a brgemm kernel
      // lets oneDNN pick the activations' layout and reorders them into it.
      if (dt == DType::f32 && std::string(pd.impl_info_str()).rfind("brg", 0) != 0) {
        bwd::primitive_desc free = make_pd(md_any(x.shape(), dt), md_any(dd.shape(), dt));
        if (!(free.src_desc() == src_md && free.diff_dst_desc() == dd_md)) pd = free;
      }
      entry->prim = make_primitive<bwd>(pd);
      entry->impl = pd.impl_info_str();
      entry->diff_weights_md = pd.diff_weights_desc();
      entry->direct = entry->diff_weights_md == dw_plain;
      entry->src_md = pd.src_desc();
      entry->diff_dst_md = pd.diff_dst_desc();
      entry->reorder_src = !(entry->src_md == src_md);
      entry->reorder_dd = !(entry->diff_dst_md == dd_md);
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " src " + describe(x) + " diff_dst " + describe(dd));
    }
    entry->src = unbound_memory(entry->src_md);
    entry->diff_dst = unbound_memory(entry->diff_dst_md);
    entry->diff_weights = unbound_memory(entry->diff_weights_md);
    entry->args = {{DNNL_ARG_SRC, entry->src},
                   {DNNL_ARG_DIFF_DST, entry->diff_dst},
                   {DNNL_ARG_DIFF_WEIGHTS, entry->diff_weights}};
    if (with_bias) {
      entry->diff_bias = unbound_memory(md_of(Shape{g.O}, kGradDType, MemoryFormat::contiguous));
      entry->args.emplace(DNNL_ARG_DIFF_BIAS, entry->diff_bias);
    }
    dispatch_log(kind_name(op, dt), entry->impl,
                 "src " + describe(x) + " diff_dst " + describe(dd));
    return entry;
  });
  // oneDNN's blocked diff_weights go to a scratch tensor, then one reorder to OIHW. Asking
  // for plain OIHW diff_weights instead is no way out in oneDNN 2.6.3: abcd gives ref:any,
  // cdba x64:gemm:jit, for bf16 and f32 alike (probed 2026-11-22).
  Tensor blocked;
  if (!e->direct)
    blocked = Tensor::empty({static_cast<int64_t>(e->diff_weights_md.get_size())}, DType::u8);
  void* dw_ptr = e->direct ? out.diff_weights.data() : blocked.data();
  Tensor src_blocked, dd_blocked;
  if (e->reorder_src) {
    src_blocked = Tensor::empty({static_cast<int64_t>(e->src_md.get_size())}, DType::u8);
    execute_reorder(src_md, handle_of(x), e->src_md, src_blocked.data());
  }
  if (e->reorder_dd) {
    dd_blocked = Tensor::empty({static_cast<int64_t>(e->diff_dst_md.get_size())}, DType::u8);
    execute_reorder(dd_md, handle_of(dd), e->diff_dst_md, dd_blocked.data());
  }
  {
    std::lock_guard<std::mutex> lock(e->mu);
    e->src.set_data_handle(e->reorder_src ? src_blocked.data() : handle_of(x));
    e->diff_dst.set_data_handle(e->reorder_dd ? dd_blocked.data() : handle_of(dd));
    e->diff_weights.set_data_handle(dw_ptr);
    if (with_bias) e->diff_bias.set_data_handle(out.diff_bias.data());
    e->prim.execute(cpu_stream(), e->args);
  }
  if (!e->direct) execute_reorder(e->diff_weights_md, dw_ptr, dw_plain, out.diff_weights.data());
  return out;
}

}  // namespace mixprec::backend::onednn
