// backend/onednn/softmax.cpp: softmax and log_softmax over one axis, forward and backward,
// with oneDNN's softmax_v2 (algorithm softmax_accurate / softmax_log; max-subtracted, f32
// accumulation).
// bf16 runs through f32 inside (convert in, softmax in f32, round once on the way out):
// oneDNN 2.6's bf16 softmax rounds its intermediates to bf16, measured up to 1 bf16 ulp
// off the correctly rounded result (log_softmax -4.5625 for -4.5332). Under autocast these
// ops run in f32 anyway (design.md §3); this keeps pure-bf16 presets honest at the cost of
// two conversions of a tensor that is small next to the matmuls around it. f16 takes the
// same route (half_emulation.h).
// dst keeps src's layout (any dense tensor; others are made contiguous first). Backward
// reads dst, as kernels.h says; diff_dst is brought to dst's layout so one primitive serves.
#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"
#include "backend/onednn/serial_scope.h"

namespace mixprec::backend::onednn {
namespace {

struct SoftmaxEntry : CacheEntry {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

using sm_fwd = dnnl::softmax_v2_forward;
using sm_bwd = dnnl::softmax_v2_backward;

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

std::string kind_name(const char* op, DType d) { return std::string(op) + " " + dtype_name(d); }

// Below this many bytes the softmax runs on the calling thread (serial_scope.h): a loss
// over [batch, classes] is a few KiB, far less work than one OpenMP region costs.
constexpr size_t kSerialBytes = size_t(256) << 10;

bool run_serial(const Tensor& t) { return t.numel() * dtype_size(t.dtype()) <= kSerialBytes; }

Tensor dense(const Tensor& t) { return t.is_dense() ? t : in_format(t, MemoryFormat::contiguous); }

void check_axis(const char* op, const Tensor& t, int64_t axis) {
  const int64_t rank = std::max<int64_t>(t.dim(), 1);  // a 0-d tensor is seen as [1]
  if (axis < 0 || axis >= rank)
    bad(std::string(op) + ": axis " + std::to_string(axis) + " out of range for " +
        shape_str(t.shape()) + " (expected 0.." + std::to_string(rank - 1) + ")");
}

sm_fwd::primitive_desc forward_pd(dnnl::algorithm alg, const dnnl_md& md, int64_t axis) {
  sm_fwd::desc desc(dnnl::prop_kind::forward_training, alg, md, md, static_cast<int>(axis));
  return sm_fwd::primitive_desc(desc, cpu_engine());
}

Tensor forward(const char* op, dnnl::algorithm alg, const Tensor& src, int64_t axis) {
  if (is_emulated(src))
    return emulate(op, src.dtype(), [&] { return forward(op, alg, widen(src), axis); });
  require_compute_dtype(op, src.dtype());
  check_axis(op, src, axis);
  if (src.dtype() == DType::bf16) {
    const Tensor x16 = dense(src);
    const Tensor x32 = reorder(x16, DType::f32, x16.suggest_memory_format());
    const Tensor y32 = forward(op, alg, x32, axis);
    return reorder(y32, DType::bf16, y32.suggest_memory_format());
  }
  const Tensor x = dense(src);
  Tensor dst = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
  if (x.numel() == 0) return dst;
  const dnnl_md md = md_of(x);
  SerialScope serial(run_serial(x));  // creation too: the kernel may fix its thread count
  PrimKey key(PrimKind::softmax_fwd);
  key.add(static_cast<int64_t>(alg)).add(md).add(axis);
  auto e = cached<SoftmaxEntry>(key, [&] {
    auto entry = std::make_shared<SoftmaxEntry>();
    try {
      auto pd = forward_pd(alg, md, axis);
      entry->prim = make_primitive<sm_fwd>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, x.dtype()) + " src " + describe(x) + " axis " +
                            std::to_string(axis));
    }
    entry->args = {{DNNL_ARG_SRC, unbound_memory(md)}, {DNNL_ARG_DST, unbound_memory(md)}};
    dispatch_log(kind_name(op, x.dtype()), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC, x.data());
  e->bind(DNNL_ARG_DST, dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return dst;
}

Tensor backward(const char* op, dnnl::algorithm alg, const Tensor& diff_dst, const Tensor& dst,
                int64_t axis) {
  if (diff_dst.dtype() != dst.dtype())
    bad(std::string(op) + ": dtype mismatch: diff_dst " + dtype_name(diff_dst.dtype()) +
        " vs dst " + dtype_name(dst.dtype()));
  if (diff_dst.shape() != dst.shape())
    bad(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " and dst " +
        shape_str(dst.shape()) + " must have the same shape");
  if (is_emulated(dst))
    return emulate(op, dst.dtype(),
                   [&] { return backward(op, alg, widen(diff_dst), widen(dst), axis); });
  require_compute_dtype(op, dst.dtype());
  check_axis(op, dst, axis);
  if (dst.dtype() == DType::bf16) {
    const Tensor y16 = dense(dst);
    const Tensor y32 = reorder(y16, DType::f32, y16.suggest_memory_format());
    const Tensor dy32 = reorder(diff_dst, DType::f32, y32.suggest_memory_format());
    const Tensor dx32 = backward(op, alg, dy32, y32, axis);
    return reorder(dx32, DType::bf16, dx32.suggest_memory_format());
  }
  const Tensor y = dense(dst);
  const Tensor dy = in_format(diff_dst, y.suggest_memory_format());
  Tensor diff_src = Tensor::empty(y.shape(), y.dtype(), y.suggest_memory_format());
  if (y.numel() == 0) return diff_src;
  const dnnl_md md = md_of(y);
  SerialScope serial(run_serial(y));
  PrimKey key(PrimKind::softmax_bwd);
  key.add(static_cast<int64_t>(alg)).add(md).add(axis);
  auto e = cached<SoftmaxEntry>(key, [&] {
    auto entry = std::make_shared<SoftmaxEntry>();
    try {
      auto hint = forward_pd(alg, md, axis);
      sm_bwd::desc desc(alg, md, md, md, static_cast<int>(axis));
      sm_bwd::primitive_desc pd(desc, cpu_engine(), hint);
      entry->prim = make_primitive<sm_bwd>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, y.dtype()) + " dst " + describe(y) + " axis " +
                            std::to_string(axis));
    }
    entry->args = {{DNNL_ARG_DIFF_DST, unbound_memory(md)},
                   {DNNL_ARG_DST, unbound_memory(md)},
                   {DNNL_ARG_DIFF_SRC, unbound_memory(md)}};
    dispatch_log(kind_name(op, y.dtype()), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_DIFF_DST, dy.data());
  e->bind(DNNL_ARG_DST, y.data());
  e->bind(DNNL_ARG_DIFF_SRC, diff_src.data());
  e->prim.execute(cpu_stream(), e->args);
  return diff_src;
}

}  // namespace

Tensor softmax_forward(const Tensor& src, int64_t axis) {
  return forward("softmax_forward", dnnl::algorithm::softmax_accurate, src, axis);
}
Tensor softmax_backward(const Tensor& diff_dst, const Tensor& dst, int64_t axis) {
  return backward("softmax_backward", dnnl::algorithm::softmax_accurate, diff_dst, dst, axis);
}
Tensor log_softmax_forward(const Tensor& src, int64_t axis) {
  return forward("log_softmax_forward", dnnl::algorithm::softmax_log, src, axis);
}
Tensor log_softmax_backward(const Tensor& diff_dst, const Tensor& dst, int64_t axis) {
  return backward("log_softmax_backward", dnnl::algorithm::softmax_log, diff_dst, dst, axis);
}

}  // namespace mixprec::backend::onednn
