// backend/onednn/pooling.cpp: 2-D max and average pooling, forward and backward.
// Letters: N batch, C channels, H/W input, OH/OW output (floor mode, PyTorch's rule).
//
// Layout: dst has src's memory format (nchw stays nchw, nhwc stays nhwc; relu and pool
// between channels-last convolutions never change layout).
// Max pooling runs forward_training, whose workspace (argmax per output, oneDNN-private,
// laid out like dst, independent of the data type) is returned as an opaque u8 tensor of
// its byte size plus one trailing byte naming the forward's memory format. Backward must
// describe diff_dst in that layout, and reading it from the workspace itself (rather than
// from a table keyed by shape) stays right when two same-shape pools run in different
// layouts before their backward passes. diff_dst in another layout is reordered to it.
// Average pooling: pooling_avg_include_padding, PyTorch's count_include_pad=True default
// (in floor mode every window lies inside the padded input, so the divisor is KH*KW).
// bf16 with overlapping windows (kernel > stride) runs in f32 inside (convert in, pool,
// convert out): oneDNN 2.6's bf16 backward accumulates the overlapping contributions in
// bf16, measured 1 ulp (0.7% relative) off the correctly rounded sum for 3x3/stride 1. Max
// forward goes through f32 too, so that backward gets the workspace of an f32 forward.
// Non-overlapping pooling (the CNNs' 2x2/2) runs in bf16 directly: nothing to accumulate.
// f16 runs the f32 primitives on widened data (half_emulation.h); its workspace is the f32
// forward's, so backward widens diff_dst and runs the f32 backward.
// Differences from backend/ref: oneDNN's max uses vmaxps, so a NaN in a window need not
// win as PyTorch's does; ties pick the first maximum, as PyTorch does.

#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {
namespace {

struct PoolEntry : CacheEntry {
  dnnl::primitive prim;
  dnnl_md workspace_md;  // max forward only
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

struct PoolGeom {
  Shape dst_shape;
  dnnl::memory::dims strides, kernel, pad_l, pad_r;
};

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

PoolGeom pool_geometry(const char* op, const Shape& src, const Pool2dParams& p) {
  if (src.size() != 4) bad(std::string(op) + ": src " + shape_str(src) + " must be 4-D (NCHW)");
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1)
    bad(std::string(op) + ": kernel (" + std::to_string(p.kernel_h) + ", " +
        std::to_string(p.kernel_w) + ") and stride (" + std::to_string(p.stride_h) + ", " +
        std::to_string(p.stride_w) + ") must be >= 1");
  if (p.pad_h < 0 || p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w)
    bad(std::string(op) + ": pad (" + std::to_string(p.pad_h) + ", " + std::to_string(p.pad_w) +
        ") must be >= 0 and at most half of kernel (" + std::to_string(p.kernel_h) + ", " +
        std::to_string(p.kernel_w) + ")");
  if (p.kernel_h > src[2] + 2 * p.pad_h || p.kernel_w > src[3] + 2 * p.pad_w)
    bad(std::string(op) + ": src " + shape_str(src) + ": kernel (" + std::to_string(p.kernel_h) +
        ", " + std::to_string(p.kernel_w) + ") does not fit the padded input");
  PoolGeom g;
  g.dst_shape = {src[0], src[1], conv_out_size(src[2], p.kernel_h, p.stride_h, p.pad_h),
                 conv_out_size(src[3], p.kernel_w, p.stride_w, p.pad_w)};
  g.strides = {p.stride_h, p.stride_w};
  g.kernel = {p.kernel_h, p.kernel_w};
  g.pad_l = {p.pad_h, p.pad_w};
  g.pad_r = g.pad_l;  // symmetric, as PyTorch passes it (see conv_util.cpp)
  return g;
}

void add_params(PrimKey& key, const Pool2dParams& p) {
  key.add(p.kernel_h).add(p.kernel_w).add(p.stride_h).add(p.stride_w).add(p.pad_h).add(p.pad_w);
}

std::string kind_name(const char* op, DType d) { return std::string(op) + " " + dtype_name(d); }

// The trailing workspace byte: the memory format forward ran in.
constexpr uint8_t kWsContiguous = 0, kWsChannelsLast = 1;

dnnl::pooling_forward::primitive_desc forward_pd(dnnl::algorithm alg, const dnnl_md& src_md,
                                                 const dnnl_md& dst_md, const PoolGeom& g) {
  dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_training, alg, src_md, dst_md,
                                   g.strides, g.kernel, g.pad_l, g.pad_r);
  return dnnl::pooling_forward::primitive_desc(desc, cpu_engine());
}

// Forward for either algorithm; returns dst and (max only) the workspace.
bool bf16_via_f32(DType dt, const Pool2dParams& p) {
  return dt == DType::bf16 && (p.kernel_h > p.stride_h || p.kernel_w > p.stride_w);
}

PoolResult pool_forward(const char* op, dnnl::algorithm alg, const Tensor& src,
                        const Pool2dParams& p) {
  if (is_emulated(src))  // the workspace is the f32 forward's, which the f32 backward reads
    return emulate_raw(op, src.dtype(), [&] {
      PoolResult r = pool_forward(op, alg, widen(src), p);
      r.dst = narrow_to(r.dst, src.dtype());
      return r;
    });
  require_compute_dtype(op, src.dtype());
  const PoolGeom g = pool_geometry(op, src.shape(), p);
  if (bf16_via_f32(src.dtype(), p)) {
    const MemoryFormat f = src.is_dense() ? src.suggest_memory_format() : MemoryFormat::contiguous;
    PoolResult r = pool_forward(op, alg, reorder(src, DType::f32, f), p);
    r.dst = reorder(r.dst, DType::bf16, f);
    return r;
  }
  const Tensor x = src.is_dense() ? src : in_format(src, MemoryFormat::contiguous);
  const MemoryFormat format = x.suggest_memory_format();
  PoolResult out;
  out.dst = Tensor::empty(g.dst_shape, x.dtype(), format);
  const bool is_max = alg == dnnl::algorithm::pooling_max;
  const uint8_t format_byte = format == MemoryFormat::channels_last ? kWsChannelsLast
                                                                      : kWsContiguous;
  if (out.dst.numel() == 0) {
    if (is_max) {
      out.workspace = Tensor::empty({1}, DType::u8);
      *out.workspace.data_ptr<uint8_t>() = format_byte;
    }
    return out;
  }
  const dnnl_md src_md = md_of(x), dst_md = md_of(out.dst);
  PrimKey key(PrimKind::pool_fwd);
  key.add(static_cast<int64_t>(alg)).add(src_md).add(dst_md);
  add_params(key, p);
  auto e = cached<PoolEntry>(key, [&] {
    auto entry = std::make_shared<PoolEntry>();
    try {
      auto pd = forward_pd(alg, src_md, dst_md, g);
      entry->prim = make_primitive<dnnl::pooling_forward>(pd);
      entry->impl = pd.impl_info_str();
      entry->workspace_md = pd.workspace_desc();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, x.dtype()) + " src " + describe(x));
    }
    entry->args = {{DNNL_ARG_SRC, unbound_memory(src_md)}, {DNNL_ARG_DST, unbound_memory(dst_md)}};
    if (entry->workspace_md.get_size() > 0)
      entry->args.emplace(DNNL_ARG_WORKSPACE, unbound_memory(entry->workspace_md));
    dispatch_log(kind_name(op, x.dtype()), entry->impl);
    return entry;
  });
  const size_t ws_bytes = e->workspace_md.get_size();
  if (is_max) {
    out.workspace = Tensor::empty({static_cast<int64_t>(ws_bytes) + 1}, DType::u8);
    out.workspace.data_ptr<uint8_t>()[ws_bytes] = format_byte;
  }
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC, x.data());
  e->bind(DNNL_ARG_DST, out.dst.data());
  if (ws_bytes > 0) e->bind(DNNL_ARG_WORKSPACE, out.workspace.data());
  e->prim.execute(cpu_stream(), e->args);
  return out;
}

Tensor pool_backward(const char* op, dnnl::algorithm alg, const Tensor& diff_dst,
                     const Tensor& workspace, const Shape& src_shape, const Pool2dParams& p) {
  if (is_emulated(diff_dst))
    return emulate(op, diff_dst.dtype(), [&] {
      return pool_backward(op, alg, widen(diff_dst), workspace, src_shape, p);
    });
  require_compute_dtype(op, diff_dst.dtype());
  const PoolGeom g = pool_geometry(op, src_shape, p);
  if (diff_dst.shape() != g.dst_shape)
    bad(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " must be " +
        shape_str(g.dst_shape) + " for src " + shape_str(src_shape));
  if (bf16_via_f32(diff_dst.dtype(), p)) {
    const MemoryFormat f =
        diff_dst.is_dense() ? diff_dst.suggest_memory_format() : MemoryFormat::contiguous;
    const Tensor diff_src32 =
        pool_backward(op, alg, reorder(diff_dst, DType::f32, f), workspace, src_shape, p);
    return reorder(diff_src32, DType::bf16, diff_src32.suggest_memory_format());
  }
  const DType dt = diff_dst.dtype();
  const bool is_max = alg == dnnl::algorithm::pooling_max;
  MemoryFormat format = diff_dst.is_dense() ? diff_dst.suggest_memory_format()
                                            : MemoryFormat::contiguous;
  const std::string ws_rule = "the u8 tensor onednn::max_pool2d_forward returned for src " +
                              shape_str(src_shape);
  if (is_max) {
    if (!workspace.defined() || workspace.dtype() != DType::u8 || workspace.dim() != 1 ||
        workspace.numel() < 1 || !workspace.is_contiguous())
      bad(std::string(op) + ": workspace " +
          (workspace.defined() ? workspace.str() : std::string("undefined")) + " is not " + ws_rule);
    const uint8_t f = workspace.data_ptr<uint8_t>()[workspace.numel() - 1];
    if (f != kWsContiguous && f != kWsChannelsLast)
      bad(std::string(op) + ": workspace format byte " + std::to_string(f) + " is not 0 or 1: " +
          "the workspace is not " + ws_rule);
    format = f == kWsChannelsLast ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  }
  const Tensor dd = in_format(diff_dst, format);
  Tensor diff_src = Tensor::empty(src_shape, dt, format);
  if (diff_src.numel() == 0) return diff_src;
  const dnnl_md dd_md = md_of(dd), ds_md = md_of(diff_src);
  PrimKey key(PrimKind::pool_bwd);
  key.add(static_cast<int64_t>(alg)).add(dd_md).add(ds_md);
  add_params(key, p);
  auto e = cached<PoolEntry>(key, [&] {
    auto entry = std::make_shared<PoolEntry>();
    try {
      auto hint = forward_pd(alg, ds_md, dd_md, g);
      dnnl::pooling_backward::desc desc(alg, ds_md, dd_md, g.strides, g.kernel, g.pad_l, g.pad_r);
      dnnl::pooling_backward::primitive_desc pd(desc, cpu_engine(), hint);
      entry->prim = make_primitive<dnnl::pooling_backward>(pd);
      entry->impl = pd.impl_info_str();
      entry->workspace_md = hint.workspace_desc();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " diff_dst " + describe(dd) + " src " +
                            shape_str(src_shape));
    }
    entry->args = {{DNNL_ARG_DIFF_DST, unbound_memory(dd_md)},
                   {DNNL_ARG_DIFF_SRC, unbound_memory(ds_md)}};
    if (entry->workspace_md.get_size() > 0)
      entry->args.emplace(DNNL_ARG_WORKSPACE, unbound_memory(entry->workspace_md));
    dispatch_log(kind_name(op, dt), entry->impl);
    return entry;
  });
  const int64_t ws_bytes = static_cast<int64_t>(e->workspace_md.get_size());
  if (is_max && workspace.numel() != ws_bytes + 1)
    bad(std::string(op) + ": workspace " + workspace.str() + " has " +
        std::to_string(workspace.numel()) + " bytes, expected " + std::to_string(ws_bytes + 1) +
        ": it is not " + ws_rule);
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_DIFF_DST, dd.data());
  e->bind(DNNL_ARG_DIFF_SRC, diff_src.data());
  if (ws_bytes > 0) e->bind(DNNL_ARG_WORKSPACE, workspace.data());
  e->prim.execute(cpu_stream(), e->args);
  return diff_src;
}

}  // namespace

PoolResult max_pool2d_forward(const Tensor& src, const Pool2dParams& p) {
  return pool_forward("max_pool2d_forward", dnnl::algorithm::pooling_max, src, p);
}

Tensor max_pool2d_backward(const Tensor& diff_dst, const Tensor& workspace,
                           const Shape& src_shape, const Pool2dParams& p) {
  return pool_backward("max_pool2d_backward", dnnl::algorithm::pooling_max, diff_dst, workspace,
                       src_shape, p);
}

Tensor avg_pool2d_forward(const Tensor& src, const Pool2dParams& p) {
  return pool_forward("avg_pool2d_forward", dnnl::algorithm::pooling_avg_include_padding, src, p)
      .dst;
}

Tensor avg_pool2d_backward(const Tensor& diff_dst, const Shape& src_shape,
                           const Pool2dParams& p) {
  return pool_backward("avg_pool2d_backward", dnnl::algorithm::pooling_avg_include_padding,
                       diff_dst, Tensor(), src_shape, p);
}

}  // namespace mixprec::backend::onednn
