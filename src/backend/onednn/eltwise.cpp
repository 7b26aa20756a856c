// backend/onednn/eltwise.cpp: relu (forward, backward from dst), unary math and
// linear_scale as oneDNN eltwise primitives.
// A dense tensor (contiguous or channels-last) is walked as one flat [numel] buffer: the
// op is elementwise, so the output keeps the input's memory format and one primitive
// serves every shape with the same element count.
// relu uses eltwise_relu_use_dst_for_bwd: backward reads the forward output (dst > 0 <=>
// src > 0), so autograd keeps one tensor per relu, as kernels.h's contract says.
// Accuracy in f32 (measured over 1M points against libm in f64): exp, tanh, sigmoid, sqrt,
// square within 2.8e-7 relative; f16 runs these f32 kernels on widened inputs and rounds
// once (half_emulation.h); log's error is absolute, up to 3.7e-6 over [1e-3, 100]
// (oneDNN's polynomial), so log(x) for x near 1 has a relative error well above f32's eps:
// f32 log runs on backend/cpu/log.h instead (ops/elementwise.cpp); bf16 and f16 stay here.
#include <bit>

#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {
namespace {

struct EltwiseEntry : CacheEntry {
  dnnl::primitive prim;
  dnnl::memory a, b, c;  // fwd: src, dst; bwd: diff_dst, dst, diff_src
  std::unordered_map<int, dnnl::memory> args;
};

std::string kind_name(const char* op, DType d) { return std::string(op) + " " + dtype_name(d); }

// Flat view of a dense tensor (a non-dense one is made contiguous first).
Tensor dense(const Tensor& t) { return t.is_dense() ? t : in_format(t, MemoryFormat::contiguous); }

dnnl_md flat_md(int64_t n, DType d) { return dnnl_md({n}, to_dnnl(d), dnnl::memory::format_tag::a); }

Tensor eltwise_forward(const char* op, dnnl::algorithm alg, float alpha, float beta,
                       const Tensor& src) {
  if (is_emulated(src))
    return emulate(op, src.dtype(),
                   [&] { return eltwise_forward(op, alg, alpha, beta, widen(src)); });
  require_compute_dtype(op, src.dtype());
  const Tensor x = dense(src);
  Tensor dst = Tensor::empty(x.shape(), x.dtype(), x.suggest_memory_format());
  const int64_t n = x.numel();
  if (n == 0) return dst;
  const dnnl_md md = flat_md(n, x.dtype());
  PrimKey key(PrimKind::eltwise_fwd);
  key.add(static_cast<int64_t>(alg)).add(md);
  // alpha/beta as their float bits: exact key, no rounding collisions
  key.add(std::bit_cast<uint32_t>(alpha)).add(std::bit_cast<uint32_t>(beta));
  auto e = cached<EltwiseEntry>(key, [&] {
    auto entry = std::make_shared<EltwiseEntry>();
    try {
      dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_training, alg, md, alpha, beta);
      dnnl::eltwise_forward::primitive_desc pd(desc, cpu_engine());
      entry->prim = make_primitive<dnnl::eltwise_forward>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, x.dtype()) + " src " + describe(x));
    }
    entry->a = unbound_memory(md);
    entry->b = unbound_memory(md);
    entry->args = {{DNNL_ARG_SRC, entry->a}, {DNNL_ARG_DST, entry->b}};
    dispatch_log(kind_name(op, x.dtype()), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->a.set_data_handle(handle_of(x));
  e->b.set_data_handle(dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return dst;
}

}  // namespace

Tensor relu_forward(const Tensor& src) {
  return eltwise_forward("relu_forward", dnnl::algorithm::eltwise_relu_use_dst_for_bwd, 0.f, 0.f,
                         src);
}

Tensor relu_backward(const Tensor& diff_dst, const Tensor& dst) {
  const char* op = "relu_backward";
  if (diff_dst.dtype() != dst.dtype())
    throw Error(Status::invalid_argument(std::string(op) + ": dtype mismatch: diff_dst " +
                                         dtype_name(diff_dst.dtype()) + " vs dst " +
                                         dtype_name(dst.dtype())));
  if (diff_dst.shape() != dst.shape())
    throw Error(Status::invalid_argument(std::string(op) + ": diff_dst " +
                                         shape_str(diff_dst.shape()) + " and dst " +
                                         shape_str(dst.shape()) + " must have the same shape"));
  if (is_emulated(dst))
    return emulate(op, dst.dtype(), [&] { return relu_backward(widen(diff_dst), widen(dst)); });
  require_compute_dtype(op, dst.dtype());
  const Tensor y = dense(dst);
  // Both flat buffers must share one element order: bring diff_dst to dst's format.
  const Tensor dy = in_format(diff_dst, y.suggest_memory_format());
  Tensor diff_src = Tensor::empty(y.shape(), y.dtype(), y.suggest_memory_format());
  const int64_t n = y.numel();
  if (n == 0) return diff_src;
  const dnnl_md md = flat_md(n, y.dtype());
  PrimKey key(PrimKind::eltwise_bwd);
  key.add(static_cast<int64_t>(dnnl::algorithm::eltwise_relu_use_dst_for_bwd)).add(md);
  auto e = cached<EltwiseEntry>(key, [&] {
    auto entry = std::make_shared<EltwiseEntry>();
    try {
      const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
      dnnl::eltwise_forward::desc fdesc(dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f);
      dnnl::eltwise_forward::primitive_desc hint(fdesc, cpu_engine());
      dnnl::eltwise_backward::desc desc(alg, md, md, 0.f, 0.f);
      dnnl::eltwise_backward::primitive_desc pd(desc, cpu_engine(), hint);
      entry->prim = make_primitive<dnnl::eltwise_backward>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, kind_name(op, y.dtype()) + " dst " + describe(y));
    }
    entry->a = unbound_memory(md);
    entry->b = unbound_memory(md);
    entry->c = unbound_memory(md);
    entry->args = {{DNNL_ARG_DIFF_DST, entry->a}, {DNNL_ARG_DST, entry->b},
                   {DNNL_ARG_DIFF_SRC, entry->c}};
    dispatch_log(kind_name(op, y.dtype()), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->a.set_data_handle(handle_of(dy));
  e->b.set_data_handle(handle_of(y));
  e->c.set_data_handle(diff_src.data());
  e->prim.execute(cpu_stream(), e->args);
  return diff_src;
}

Tensor unary(UnaryOp op, const Tensor& src) {
  using alg = dnnl::algorithm;
  switch (op) {
    case UnaryOp::exp: return eltwise_forward("unary exp", alg::eltwise_exp, 0.f, 0.f, src);
    case UnaryOp::log: return eltwise_forward("unary log", alg::eltwise_log, 0.f, 0.f, src);
    case UnaryOp::neg: return eltwise_forward("unary neg", alg::eltwise_linear, -1.f, 0.f, src);
    case UnaryOp::sqrt: return eltwise_forward("unary sqrt", alg::eltwise_sqrt, 0.f, 0.f, src);
    case UnaryOp::abs: return eltwise_forward("unary abs", alg::eltwise_abs, 0.f, 0.f, src);
    case UnaryOp::tanh: return eltwise_forward("unary tanh", alg::eltwise_tanh, 0.f, 0.f, src);
    case UnaryOp::sigmoid:
      return eltwise_forward("unary sigmoid", alg::eltwise_logistic, 0.f, 0.f, src);
    case UnaryOp::square:
      return eltwise_forward("unary square", alg::eltwise_square, 0.f, 0.f, src);
  }
  throw Error(Status::unimplemented("unary: op " + std::to_string(int(op)) +
                                    " has no oneDNN eltwise algorithm"));
}

Tensor linear_scale(const Tensor& src, double alpha, double beta) {
  // alpha and beta are rounded to f32: oneDNN's eltwise_linear takes floats.
  return eltwise_forward("linear_scale", dnnl::algorithm::eltwise_linear,
                         static_cast<float>(alpha), static_cast<float>(beta), src);
}

}  // namespace mixprec::backend::onednn
