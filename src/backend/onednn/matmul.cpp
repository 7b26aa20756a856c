// backend/onednn/matmul.cpp: batched matrix product with oneDNN matmul.
// Letters: a [B.., M, K] x b [B.., K, N] -> dst [B.., M, N]; batch dims equal or 1
// (broadcast), the shorter operand gets leading 1s. trans_a / trans_b read the last two
// dims transposed: only the strides of the memory desc swap, nothing is copied, and
// oneDNN's brgemm kernels take either order (ab / ba) directly.
// dst is contiguous, in the inputs' dtype (bf16 -> bf16, f32 accumulation inside oneDNN;
// f16 is emulated on the f32 primitive, f16_emulation.h).
#include "backend/kernels.h"
#include "backend/onednn/f16_emulation.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {
namespace {

struct MatmulEntry : CacheEntry {
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

// Logical [B.., rows, cols] desc of t right-aligned to `rank` dims; `trans` swaps the last
// two dims (and their strides).
dnnl_md operand_md(const Tensor& t, size_t rank, bool trans) {
  dnnl::memory::dims dims(rank, 1), strides(rank, 0);
  const size_t r = t.shape().size();
  const Shape st = canonical_strides(t);
  for (size_t i = 0; i < r; ++i) {
    dims[rank - r + i] = t.shape()[i];
    strides[rank - r + i] = st[i];
  }
  // Padded leading dims have size 1: any stride is valid; use the full extent.
  for (size_t i = 0; i < rank - r; ++i) strides[i] = std::max<int64_t>(t.numel(), 1);
  if (trans) {
    std::swap(dims[rank - 1], dims[rank - 2]);
    std::swap(strides[rank - 1], strides[rank - 2]);
  }
  return dnnl_md(dims, to_dnnl(t.dtype()), strides);
}

// A tensor whose last two dims are not dense either way (a general view) is copied.
Tensor matrix_dense(const Tensor& t) {
  const int64_t r = t.dim();
  const auto& st = t.strides();
  const bool rows = st[r - 1] == 1 || t.size(r - 1) == 1;
  const bool cols = st[r - 2] == 1 || t.size(r - 2) == 1;
  return rows || cols ? t : in_format(t, MemoryFormat::contiguous);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const char* op = "matmul";
  if (a.dim() < 2 || b.dim() < 2)
    bad(std::string(op) + ": a " + shape_str(a.shape()) + " and b " + shape_str(b.shape()) +
        " must be at least 2-D");
  if (a.dtype() != b.dtype())
    bad(std::string(op) + ": dtype mismatch: a " + dtype_name(a.dtype()) + " vs b " +
        dtype_name(b.dtype()));
  if (is_f16(a))  // transposed views stay views: widen keeps their strides
    return emulate_f16(op, [&] { return matmul(widen(a), widen(b), trans_a, trans_b); });
  require_compute_dtype(op, a.dtype());
  const size_t rank = std::max(a.shape().size(), b.shape().size());
  const Tensor x = matrix_dense(a), y = matrix_dense(b);
  const dnnl_md a_md = operand_md(x, rank, trans_a), b_md = operand_md(y, rank, trans_b);
  const auto& ad = a_md.data.dims;
  const auto& bd = b_md.data.dims;
  const int64_t M = ad[rank - 2], K = ad[rank - 1], N = bd[rank - 1];
  if (bd[rank - 2] != K)
    bad(std::string(op) + ": inner dims differ: a " + shape_str(a.shape()) +
        (trans_a ? " (transposed)" : "") + " has K=" + std::to_string(K) + ", b " +
        shape_str(b.shape()) + (trans_b ? " (transposed)" : "") + " has K=" +
        std::to_string(bd[rank - 2]));
  Shape out_shape(rank);
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
      bad(std::string(op) + ": batch dims of a " + shape_str(a.shape()) + " and b " +
          shape_str(b.shape()) + " differ at dim " + std::to_string(i) +
          " (equal or 1 expected)");
    out_shape[i] = std::max(ad[i], bd[i]);
  }
  out_shape[rank - 2] = M;
  out_shape[rank - 1] = N;
  const DType dt = a.dtype();
  Tensor dst = Tensor::empty(out_shape, dt);
  if (dst.numel() == 0) return dst;
  if (K == 0) {
    dst.fill_(0.0);
    return dst;
  }
  const dnnl_md dst_md = md_of(dst);
  PrimKey key(PrimKind::matmul);
  key.add(a_md).add(b_md).add(dst_md);
  auto e = cached<MatmulEntry>(key, [&] {
    auto entry = std::make_shared<MatmulEntry>();
    try {
      dnnl::matmul::desc desc(a_md, b_md, dst_md);
      dnnl::matmul::primitive_desc pd(desc, cpu_engine());
      entry->prim = make_primitive<dnnl::matmul>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, std::string(op) + " " + dtype_name(dt) + " a " + describe(a) +
                            (trans_a ? "^T" : "") + " b " + describe(b) + (trans_b ? "^T" : ""));
    }
    entry->args = {{DNNL_ARG_SRC, unbound_memory(a_md)},
                   {DNNL_ARG_WEIGHTS, unbound_memory(b_md)},
                   {DNNL_ARG_DST, unbound_memory(dst_md)}};
    dispatch_log(std::string(op) + " " + dtype_name(dt), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC, x.data());
  e->bind(DNNL_ARG_WEIGHTS, y.data());
  e->bind(DNNL_ARG_DST, dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return dst;
}

}  // namespace mixprec::backend::onednn
