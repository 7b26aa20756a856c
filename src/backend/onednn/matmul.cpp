// backend/onednn/matmul.cpp: batched matrix product with oneDNN matmul.
// Letters: a [B.., M, K] x b [B.., K, N] -> dst [B.., M, N]; batch dims equal or 1
// (broadcast), the shorter operand gets leading 1s. trans_a / trans_b read the last two
// dims transposed: only the strides of the memory desc swap, nothing is copied, and
// oneDNN's brgemm kernels take either order (ab / ba) directly.
// dst is contiguous, in the inputs' dtype (bf16 -> bf16, f32 accumulation inside oneDNN;
// f16 is emulated on the f32 primitive, half_emulation.h).
#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/matmul_util.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {
namespace {

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const char* op = "matmul";
  if (a.dim() < 2 || b.dim() < 2)
    bad(std::string(op) + ": a " + shape_str(a.shape()) + " and b " + shape_str(b.shape()) +
        " must be at least 2-D");
  if (a.dtype() != b.dtype())
    bad(std::string(op) + ": dtype mismatch: a " + dtype_name(a.dtype()) + " vs b " +
        dtype_name(b.dtype()));
  if (is_emulated(a))  // transposed views stay views: widen keeps their strides
    return emulate(op, a.dtype(), [&] { return matmul(widen(a), widen(b), trans_a, trans_b); });
  require_compute_dtype(op, a.dtype());
  const size_t rank = std::max(a.shape().size(), b.shape().size());
  const Tensor x = matmul_dense(a), y = matmul_dense(b);
  const dnnl_md a_md = matmul_operand_md(x, rank, trans_a), b_md = matmul_operand_md(y, rank, trans_b);
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
  auto e = matmul_entry(PrimKind::matmul, op, dt, a_md, b_md, nullptr, dst_md, [&] {
    return std::string(op) + " " + dtype_name(dt) + " a " + describe(a) + (trans_a ? "^T" : "") +
           " b " + describe(b) + (trans_b ? "^T" : "");
  });
  run_matmul(*e, x.data(), y.data(), nullptr, dst.data());
  return dst;
}

}  // namespace mixprec::backend::onednn
