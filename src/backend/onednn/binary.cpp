// backend/onednn/binary.cpp: elementwise add/sub/mul/div/max/min with numpy broadcasting.
// oneDNN's binary broadcasts only its second source (src1 dims may be 1), so:
// - b broadcast into a's shape: direct.
// - a broadcast into b's shape: swap for the commutative ops; sub runs as -(b - a) with an
//   eltwise_linear(-1) post-op (negation is exact: bit-identical up to the sign of a zero
//   result); div throws unimplemented (the ops layer falls back to ref).
// - both broadcast (e.g. [N,1] x [1,M]): unimplemented, same fallback.
// The output takes the full-size operand's memory format. f16 runs in f32 and rounds once
// (half_emulation.h): for add/sub/mul/max/min of two f16 values that equals the correctly
// rounded f16 result (f32's 24 significand bits >= 2 * 11 + 2, so double rounding is
// innocuous).
// Difference from backend/ref: max/min use vmaxps/vminps, so a NaN operand does not always
// propagate as torch.maximum's does.
#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {
namespace {

struct BinaryEntry : CacheEntry {
  dnnl::binary prim;
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "binary add";
    case BinaryOp::sub: return "binary sub";
    case BinaryOp::mul: return "binary mul";
    case BinaryOp::div: return "binary div";
    case BinaryOp::max: return "binary max";
    case BinaryOp::min: return "binary min";
  }
  return "binary";
}

dnnl::algorithm algorithm_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return dnnl::algorithm::binary_add;
    case BinaryOp::sub: return dnnl::algorithm::binary_sub;
    case BinaryOp::mul: return dnnl::algorithm::binary_mul;
    case BinaryOp::div: return dnnl::algorithm::binary_div;
    case BinaryOp::max: return dnnl::algorithm::binary_max;
    case BinaryOp::min: return dnnl::algorithm::binary_min;
  }
  return dnnl::algorithm::undef;
}

Tensor dense(const Tensor& t) { return t.is_dense() ? t : in_format(t, MemoryFormat::contiguous); }

// t's shape right-aligned to `rank` dims (leading 1s) with its strides. Dense tensors get
// their format's canonical strides (see md_of), so oneDNN recognises the layout; the padded
// leading dims get the stride of a dim outside the whole tensor (any value is valid for a
// size-1 dim, but stride 1 there made oneDNN read [128, 128] as layout "bca" and take its
// ref:any kernel: 7 ms for the GPT's [16, 128, 128] + [128, 128] position add).
dnnl_md aligned_md(const Tensor& t, size_t rank) {
  const int64_t outside = std::max<int64_t>(t.numel(), 1);
  dnnl::memory::dims dims(rank, 1), strides(rank, outside);
  const size_t r = t.shape().size();
  const Shape st = canonical_strides(t);
  for (size_t i = 0; i < r; ++i) {
    dims[rank - r + i] = t.shape()[i];
    strides[rank - r + i] = st[i];
  }
  return dnnl_md(dims, to_dnnl(t.dtype()), strides);
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  if (a.dtype() != b.dtype())
    throw Error(Status::invalid_argument(std::string(name) + ": dtype mismatch: a " +
                                         dtype_name(a.dtype()) + " vs b " + dtype_name(b.dtype())));
  if (is_emulated(a))
    return emulate(name, a.dtype(), [&] { return binary(op, widen(a), widen(b)); });
  require_compute_dtype(name, a.dtype());
  const size_t rank = std::max(a.shape().size(), b.shape().size());
  Shape out_shape(rank, 1);
  bool a_full = true, b_full = true;
  for (size_t i = 1; i <= rank; ++i) {
    const int64_t sa = i <= a.shape().size() ? a.shape()[a.shape().size() - i] : 1;
    const int64_t sb = i <= b.shape().size() ? b.shape()[b.shape().size() - i] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      throw Error(Status::invalid_argument(
          std::string(name) + ": shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
          " are not broadcastable (dim -" + std::to_string(i) + ": " + std::to_string(sa) +
          " vs " + std::to_string(sb) + ")"));
    const int64_t so = sa == 1 ? sb : sa;
    out_shape[rank - i] = so;
    a_full = a_full && sa == so;
    b_full = b_full && sb == so;
  }
  const bool swap = !a_full;
  const bool negate = swap && op == BinaryOp::sub;
  if (!a_full && !b_full)
    throw Error(Status::unimplemented(std::string(name) + ": shapes " + shape_str(a.shape()) +
                                      " and " + shape_str(b.shape()) +
                                      " both broadcast; oneDNN broadcasts only src1"));
  if (swap && op == BinaryOp::div)
    throw Error(Status::unimplemented(std::string(name) + ": a " + shape_str(a.shape()) +
                                      " broadcasts into b " + shape_str(b.shape()) +
                                      "; oneDNN broadcasts only src1"));
  const Tensor src0 = dense(swap ? b : a);
  const Tensor src1 = dense(swap ? a : b);
  const DType dt = a.dtype();
  Tensor dst = Tensor::empty(out_shape, dt,
                             rank == 4 ? src0.suggest_memory_format() : MemoryFormat::contiguous);
  if (dst.numel() == 0) return dst;
  const size_t r = std::max<size_t>(rank, 1);  // 0-d operands run as [1]
  const dnnl_md md0 = aligned_md(src0, r), md1 = aligned_md(src1, r);
  const dnnl_md dst_md = aligned_md(dst, r);
  const dnnl::algorithm alg = swap && op == BinaryOp::sub ? dnnl::algorithm::binary_sub
                                                          : algorithm_of(op);
  PrimKey key(PrimKind::binary);
  key.add(static_cast<int64_t>(alg)).add(negate).add(md0).add(md1).add(dst_md);
  auto e = cached<BinaryEntry>(key, [&] {
    auto entry = std::make_shared<BinaryEntry>();
    try {
      dnnl::binary::desc desc(alg, md0, md1, dst_md);
      dnnl::primitive_attr attr;
      if (negate) {
        dnnl::post_ops po;
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, -1.f, 0.f);
        attr.set_post_ops(po);
      }
      dnnl::binary::primitive_desc pd(desc, attr, cpu_engine());
      entry->prim = make_primitive<dnnl::binary>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, std::string(name) + " " + dtype_name(dt) + " a " + describe(a) + " b " +
                            describe(b));
    }
    entry->args = {{DNNL_ARG_SRC_0, unbound_memory(md0)},
                   {DNNL_ARG_SRC_1, unbound_memory(md1)},
                   {DNNL_ARG_DST, unbound_memory(dst_md)}};
    dispatch_log(std::string(name) + " " + dtype_name(dt), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC_0, src0.data());
  e->bind(DNNL_ARG_SRC_1, src1.data());
  e->bind(DNNL_ARG_DST, dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return dst;
}

}  // namespace mixprec::backend::onednn
