// backend/onednn/matmul_util.h: what matmul.cpp and linear.cpp share: strided operand descs
// (a transpose is a swap of dims and strides, never a copy) and one cached oneDNN matmul
// with an optional bias, created once per key and run on the calling thread's stream.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"

namespace mixprec::backend::onednn {

// Logical [B.., rows, cols] desc of t right-aligned to `rank` dims (leading 1s added);
// `trans` swaps the last two dims and their strides.
dnnl_md matmul_operand_md(const Tensor& t, size_t rank, bool trans);

// t itself when its last two dims are dense either way (a transposed view included), else
// a contiguous copy: brgemm takes either order, not a general view.
Tensor matmul_dense(const Tensor& t);

struct MatmulEntry : CacheEntry {
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

PrimKey matmul_key(PrimKind kind, const dnnl_md& a_md, const dnnl_md& b_md,
                   const dnnl_md* bias_md, const dnnl_md& dst_md);
// Creates the primitive (a cache miss) and logs it as "op dtype" (MIXPREC_VERBOSE=dispatch);
// `what()` names the problem in a creation error.
std::shared_ptr<MatmulEntry> make_matmul_entry(const char* op, DType dt, const dnnl_md& a_md,
                                               const dnnl_md& b_md, const dnnl_md* bias_md,
                                               const dnnl_md& dst_md,
                                               const std::function<std::string()>& what);

// The cache entry for dst = a x b (+ bias): created on the first call with this key (kind
// and every desc), reused after. `what` is only called (and wrapped) on a miss, so a cache
// hit builds no string and no std::function.
template <class What>
std::shared_ptr<MatmulEntry> matmul_entry(PrimKind kind, const char* op, DType dt, const dnnl_md& a_md,
                                          const dnnl_md& b_md, const dnnl_md* bias_md,
                                          const dnnl_md& dst_md, What&& what) {
  return cached<MatmulEntry>(matmul_key(kind, a_md, b_md, bias_md, dst_md), [&] {
    return make_matmul_entry(op, dt, a_md, b_md, bias_md, dst_md, what);
  });
}

// Runs the entry on these buffers (bias null when the entry has none).
void run_matmul(MatmulEntry& e, const void* a, const void* b, const void* bias, void* dst);

}  // namespace mixprec::backend::onednn
