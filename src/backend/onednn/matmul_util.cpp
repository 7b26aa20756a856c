// backend/onednn/matmul_util.cpp: see matmul_util.h.
#include "backend/onednn/matmul_util.h"

#include <algorithm>

#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {

dnnl_md matmul_operand_md(const Tensor& t, size_t rank, bool trans) {
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

Tensor matmul_dense(const Tensor& t) {
  const int64_t r = t.dim();
  const auto& st = t.strides();
  const bool rows = st[r - 1] == 1 || t.size(r - 1) == 1;
  const bool cols = st[r - 2] == 1 || t.size(r - 2) == 1;
  return rows || cols ? t : in_format(t, MemoryFormat::contiguous);
}

PrimKey matmul_key(PrimKind kind, const dnnl_md& a_md, const dnnl_md& b_md,
                   const dnnl_md* bias_md, const dnnl_md& dst_md) {
  PrimKey key(kind);
  key.add(a_md).add(b_md).add(dst_md).add(bias_md != nullptr);
  if (bias_md) key.add(*bias_md);
  return key;
}

std::shared_ptr<MatmulEntry> make_matmul_entry(const char* op, DType dt, const dnnl_md& a_md,
                                               const dnnl_md& b_md, const dnnl_md* bias_md,
                                               const dnnl_md& dst_md,
                                               const std::function<std::string()>& what) {
  auto entry = std::make_shared<MatmulEntry>();
  try {
    auto desc = bias_md ? dnnl::matmul::desc(a_md, b_md, *bias_md, dst_md)
                        : dnnl::matmul::desc(a_md, b_md, dst_md);
    dnnl::matmul::primitive_desc pd(desc, cpu_engine());
    entry->prim = make_primitive<dnnl::matmul>(pd);
    entry->impl = pd.impl_info_str();
  } catch (const dnnl::error& err) {
    rethrow_dnnl(err, what());
  }
  entry->args = {{DNNL_ARG_SRC, unbound_memory(a_md)},
                 {DNNL_ARG_WEIGHTS, unbound_memory(b_md)},
                 {DNNL_ARG_DST, unbound_memory(dst_md)}};
  if (bias_md) entry->args.emplace(DNNL_ARG_BIAS, unbound_memory(*bias_md));
  dispatch_log(std::string(op) + " " + dtype_name(dt), entry->impl);
  return entry;
}

void run_matmul(MatmulEntry& e, const void* a, const void* b, const void* bias, void* dst) {
  std::lock_guard<std::mutex> lock(e.mu);
  e.bind(DNNL_ARG_SRC, a);
  e.bind(DNNL_ARG_WEIGHTS, b);
  if (bias) e.bind(DNNL_ARG_BIAS, bias);
  e.bind(DNNL_ARG_DST, dst);
  e.prim.execute(cpu_stream(), e.args);
}

}  // namespace mixprec::backend::onednn
