// backend/onednn/linear.cpp: fully connected layer (PyTorch layout) as oneDNN inner product.
// Letters: N rows (batch), K input features, O output features.
//   forward:          src [N,K], weights [O,K], bias [O] -> dst [N,O]
//   backward data:    diff_dst [N,O], weights [O,K]      -> diff_src [N,K]
//   backward weights: src [N,K], diff_dst [N,O]          -> diff_weights [O,K], diff_bias [O]
// PyTorch's [O,K] is oneDNN's "oi" weights layout, but the primitive prefers a blocked one
// (format any): the reorder is cached per (buffer, version) in weights_cache.h, so it runs
// once per optimizer step, not once per call.
// Why inner product rather than matmul: limits.md §1.2 has bf16 inner product forward at
// 408 vs 271-390 GFLOP/s for matmul (4096^3, 1 thread), and it computes diff_bias inside
// backward weights. A head-to-head on fc1 (256x4096->256) and the MLP's 784->1024 and
// 1024->1024, fwd + bwd_data + bwd_weights, interleaved over 4 rounds, was taken only while
// other jobs loaded the machine (timings quantised to ~4 ms scheduler slices): the two
// were within noise of each other (matmul ahead for fc1, behind for 784->1024). Revisit
// with bench/ on a quiet machine.
// Precision: bf16 in, bf16 out (f32 accumulation); backward weights returns f32
// diff_weights/diff_bias for bf16 inputs, as conv.cpp does and for the same reason: the
// gradient reaching an fp32 master stays fp32. f16 is emulated on the f32 primitives
// (f16_emulation.h), backward weights returning f32 for it too.
#include "backend/kernels.h"
#include "backend/onednn/f16_emulation.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"
#include "backend/onednn/serial_scope.h"
#include "backend/onednn/weights_cache.h"

namespace mixprec::backend::onednn {
namespace {

using ip_fwd = dnnl::inner_product_forward;
using ip_bwd_data = dnnl::inner_product_backward_data;
using ip_bwd_weights = dnnl::inner_product_backward_weights;

struct IpEntry : CacheEntry {
  dnnl::primitive prim;
  dnnl_md weights_md;  // forward / backward data: the layout to reorder weights into
  bool direct = true;  // backward weights: diff_weights written straight into [O,K] f32
  std::unordered_map<int, dnnl::memory> args;  // keyed by DNNL_ARG_*
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

void check_2d(const char* op, const char* name, const Tensor& t) {
  if (t.dim() != 2) bad(std::string(op) + ": " + name + " " + shape_str(t.shape()) + " must be 2-D");
}

void check_same_dtype(const char* op, const char* an, const Tensor& a, const char* bn,
                      const Tensor& b) {
  if (b.defined() && a.dtype() != b.dtype())
    bad(std::string(op) + ": dtype mismatch: " + an + " " + dtype_name(a.dtype()) + " vs " + bn +
        " " + dtype_name(b.dtype()));
}

std::string kind_name(const char* op, DType d) { return std::string(op) + " " + dtype_name(d); }

ip_fwd::primitive_desc forward_pd(const dnnl_md& src_md, const Shape& w_shape, DType dt,
                                  bool with_bias, const dnnl_md& dst_md) {
  const dnnl_md w_any = md_any(w_shape, dt);
  auto desc = with_bias ? ip_fwd::desc(dnnl::prop_kind::forward_training, src_md, w_any,
                                       md_of(Shape{w_shape[0]}, dt, MemoryFormat::contiguous),
                                       dst_md)
                        : ip_fwd::desc(dnnl::prop_kind::forward_training, src_md, w_any, dst_md);
  return ip_fwd::primitive_desc(desc, cpu_engine());
}

// Products of at most this many multiply-adds (N*K*O) create and run their primitive on
// the calling thread (serial_scope.h): the seed CNN's fc2 (256x256 -> 10, 0.66 M) takes
// ~10 us in each pass, far less than an OpenMP region costs on a shared host. brgemm fixes
// its thread count at creation, hence the scope around the cache lookup too; N, K and O are
// in every key through the src/dst descs, so a key always makes the same choice.
constexpr int64_t kSerialMacs = int64_t(1) << 20;

bool run_serial(int64_t n, int64_t k, int64_t o) { return n * k * o <= kSerialMacs; }

void add_arg(IpEntry& e, int arg, const dnnl_md& md) { e.args.emplace(arg, unbound_memory(md)); }

}  // namespace

Tensor linear_forward(const Tensor& src, const Tensor& weights, const Tensor& bias) {
  const char* op = "linear_forward";
  check_2d(op, "src", src);
  check_2d(op, "weights", weights);
  check_same_dtype(op, "src", src, "weights", weights);
  check_same_dtype(op, "src", src, "bias", bias);
  if (is_f16(src))
    return emulate_f16(op, [&] { return linear_forward(widen(src), widen(weights), widen(bias)); });
  require_compute_dtype(op, src.dtype());
  const int64_t N = src.size(0), K = src.size(1), O = weights.size(0);
  if (weights.size(1) != K)
    bad(std::string(op) + ": src " + shape_str(src.shape()) + " has " + std::to_string(K) +
        " features, weights " + shape_str(weights.shape()) + " expect " +
        std::to_string(weights.size(1)));
  if (bias.defined() && bias.shape() != Shape{O})
    bad(std::string(op) + ": bias " + shape_str(bias.shape()) + " must be [" + std::to_string(O) + "]");
  const DType dt = src.dtype();
  Tensor dst = Tensor::empty({N, O}, dt);
  if (dst.numel() == 0) return dst;
  if (K == 0) {  // empty reduction: dst = bias (or 0)
    if (bias.defined()) {
      for (int64_t n = 0; n < N; ++n) dst.as_strided({O}, {1}, n * O).copy_(bias);
    } else {
      dst.fill_(0.0);
    }
    return dst;
  }
  const Tensor x = in_format(src, MemoryFormat::contiguous);
  const Tensor b = bias.defined() ? in_format(bias, MemoryFormat::contiguous) : Tensor();
  const dnnl_md src_md = md_of(x), dst_md = md_of(dst);
  SerialScope serial(run_serial(N, K, O));
  PrimKey key(PrimKind::ip_fwd);
  key.add(src_md).add(dst_md).add(b.defined());
  auto e = cached<IpEntry>(key, [&] {
    auto entry = std::make_shared<IpEntry>();
    try {
      auto pd = forward_pd(src_md, weights.shape(), dt, b.defined(), dst_md);
      entry->prim = make_primitive<ip_fwd>(pd);
      entry->impl = pd.impl_info_str();
      entry->weights_md = pd.weights_desc();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " src " + shape_str(src.shape()) + " weights " +
                            shape_str(weights.shape()));
    }
    add_arg(*entry, DNNL_ARG_SRC, src_md);
    add_arg(*entry, DNNL_ARG_WEIGHTS, entry->weights_md);
    add_arg(*entry, DNNL_ARG_DST, dst_md);
    if (b.defined()) add_arg(*entry, DNNL_ARG_BIAS, md_of(b));
    dispatch_log(kind_name(op, dt), entry->impl);
    return entry;
  });
  const Tensor w = weights_in_layout(weights, e->weights_md);
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC, x.data());
  e->bind(DNNL_ARG_WEIGHTS, w.data());
  if (b.defined()) e->bind(DNNL_ARG_BIAS, b.data());
  e->bind(DNNL_ARG_DST, dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return dst;
}

Tensor linear_backward_data(const Tensor& diff_dst, const Tensor& weights) {
  const char* op = "linear_backward_data";
  check_2d(op, "diff_dst", diff_dst);
  check_2d(op, "weights", weights);
  check_same_dtype(op, "diff_dst", diff_dst, "weights", weights);
  if (is_f16(diff_dst))
    return emulate_f16(op, [&] { return linear_backward_data(widen(diff_dst), widen(weights)); });
  require_compute_dtype(op, diff_dst.dtype());
  const int64_t N = diff_dst.size(0), O = weights.size(0), K = weights.size(1);
  if (diff_dst.size(1) != O)
    bad(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " must have " +
        std::to_string(O) + " columns for weights " + shape_str(weights.shape()));
  const DType dt = diff_dst.dtype();
  Tensor diff_src = Tensor::empty({N, K}, dt);
  if (diff_src.numel() == 0) return diff_src;
  if (O == 0) {
    diff_src.fill_(0.0);
    return diff_src;
  }
  const Tensor dd = in_format(diff_dst, MemoryFormat::contiguous);
  const dnnl_md dd_md = md_of(dd), ds_md = md_of(diff_src);
  SerialScope serial(run_serial(N, K, O));
  PrimKey key(PrimKind::ip_bwd_data);
  key.add(dd_md).add(ds_md);
  auto e = cached<IpEntry>(key, [&] {
    auto entry = std::make_shared<IpEntry>();
    try {
      auto hint = forward_pd(ds_md, weights.shape(), dt, false, dd_md);
      ip_bwd_data::desc desc(ds_md, md_any(weights.shape(), dt), dd_md);
      ip_bwd_data::primitive_desc pd(desc, cpu_engine(), hint);
      entry->prim = make_primitive<ip_bwd_data>(pd);
      entry->impl = pd.impl_info_str();
      entry->weights_md = pd.weights_desc();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " diff_dst " + shape_str(diff_dst.shape()) +
                            " weights " + shape_str(weights.shape()));
    }
    add_arg(*entry, DNNL_ARG_DIFF_DST, dd_md);
    add_arg(*entry, DNNL_ARG_WEIGHTS, entry->weights_md);
    add_arg(*entry, DNNL_ARG_DIFF_SRC, ds_md);
    dispatch_log(kind_name(op, dt), entry->impl);
    return entry;
  });
  const Tensor w = weights_in_layout(weights, e->weights_md);
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_DIFF_DST, dd.data());
  e->bind(DNNL_ARG_WEIGHTS, w.data());
  e->bind(DNNL_ARG_DIFF_SRC, diff_src.data());
  e->prim.execute(cpu_stream(), e->args);
  return diff_src;
}

WeightGrads linear_backward_weights(const Tensor& src, const Tensor& diff_dst, bool with_bias) {
  const char* op = "linear_backward_weights";
  check_2d(op, "src", src);
  check_2d(op, "diff_dst", diff_dst);
  check_same_dtype(op, "src", src, "diff_dst", diff_dst);
  if (is_f16(src))  // f32 diff_weights/diff_bias, as for bf16 (f16_emulation.h)
    return emulate_f16_raw(
        op, [&] { return linear_backward_weights(widen(src), widen(diff_dst), with_bias); });
  require_compute_dtype(op, src.dtype());
  const int64_t N = src.size(0), K = src.size(1), O = diff_dst.size(1);
  if (diff_dst.size(0) != N)
    bad(std::string(op) + ": src " + shape_str(src.shape()) + " and diff_dst " +
        shape_str(diff_dst.shape()) + " must have the same number of rows");
  const DType dt = src.dtype();
  constexpr DType kGradDType = DType::f32;  // f32 for bf16 inputs too (see the banner)
  WeightGrads out;
  out.diff_weights = Tensor::empty({O, K}, kGradDType);
  if (with_bias) out.diff_bias = Tensor::empty({O}, kGradDType);
  if (N == 0 || O == 0 || K == 0) {
    out.diff_weights.fill_(0.0);
    if (with_bias && K == 0 && N > 0 && O > 0)  // no weights, but the bias still learns
      out.diff_bias = reduce(ReduceOp::sum, reorder(diff_dst, kGradDType, MemoryFormat::contiguous),
                             {0}, false);
    else if (with_bias)
      out.diff_bias.fill_(0.0);
    return out;
  }
  const Tensor x = in_format(src, MemoryFormat::contiguous);
  const Tensor dd = in_format(diff_dst, MemoryFormat::contiguous);
  const dnnl_md src_md = md_of(x), dd_md = md_of(dd), dw_plain = md_of(out.diff_weights);
  const dnnl_md db_md = md_of(Shape{O}, kGradDType, MemoryFormat::contiguous);
  SerialScope serial(run_serial(N, K, O));
  PrimKey key(PrimKind::ip_bwd_weights);
  key.add(src_md).add(dd_md).add(with_bias);
  auto e = cached<IpEntry>(key, [&] {
    auto entry = std::make_shared<IpEntry>();
    try {
      auto hint = forward_pd(src_md, {O, K}, dt, with_bias, dd_md);
      const dnnl_md dw_any = md_any({O, K}, kGradDType);
      auto desc = with_bias ? ip_bwd_weights::desc(src_md, dw_any, db_md, dd_md)
                            : ip_bwd_weights::desc(src_md, dw_any, dd_md);
      ip_bwd_weights::primitive_desc pd(desc, cpu_engine(), hint);
      entry->prim = make_primitive<ip_bwd_weights>(pd);
      entry->impl = pd.impl_info_str();
      entry->weights_md = pd.diff_weights_desc();
      entry->direct = entry->weights_md == dw_plain;
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, dt) + " src " + shape_str(src.shape()) + " diff_dst " +
                            shape_str(diff_dst.shape()));
    }
    add_arg(*entry, DNNL_ARG_SRC, src_md);
    add_arg(*entry, DNNL_ARG_DIFF_DST, dd_md);
    add_arg(*entry, DNNL_ARG_DIFF_WEIGHTS, entry->weights_md);
    if (with_bias) add_arg(*entry, DNNL_ARG_DIFF_BIAS, db_md);
    dispatch_log(kind_name(op, dt), entry->impl);
    return entry;
  });
  // Blocked diff_weights, then one reorder: a plain ab request gives x64:gemm:jit instead
  // of brgemm_bwd_w in oneDNN 2.6.3, bf16 and f32 alike (probed 2026-11-22).
  Tensor blocked;
  if (!e->direct)
    blocked = Tensor::empty({static_cast<int64_t>(e->weights_md.get_size())}, DType::u8);
  void* dw_ptr = e->direct ? out.diff_weights.data() : blocked.data();
  {
    std::lock_guard<std::mutex> lock(e->mu);
    e->bind(DNNL_ARG_SRC, x.data());
    e->bind(DNNL_ARG_DIFF_DST, dd.data());
    e->bind(DNNL_ARG_DIFF_WEIGHTS, dw_ptr);
    if (with_bias) e->bind(DNNL_ARG_DIFF_BIAS, out.diff_bias.data());
    e->prim.execute(cpu_stream(), e->args);
  }
  if (!e->direct) execute_reorder(e->weights_md, dw_ptr, dw_plain, out.diff_weights.data());
  return out;
}

}  // namespace mixprec::backend::onednn
