// backend/onednn/reduce.cpp: sum/mean/max/min over a set of axes (oneDNN reduction).
// dst is contiguous; keepdim=false drops the reduced axes as a view of the same buffer.
// Semantics follow backend/ref where oneDNN allows: an empty `axes` is a copy, the sum of
// an empty set is 0, the mean NaN, and max/min of an empty set are an error. bf16 sums
// accumulate in f32 inside oneDNN and round once; f16 too (half_emulation.h).
// Difference from backend/ref: oneDNN's max/min need not propagate NaN.
#include <limits>

#include "backend/kernels.h"
#include "backend/onednn/dispatch_log.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"

namespace mixprec::backend::onednn {
namespace {

struct ReduceEntry : CacheEntry {
  dnnl::reduction prim;
  std::unordered_map<int, dnnl::memory> args;
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

dnnl::algorithm algorithm_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return dnnl::algorithm::reduction_sum;
    case ReduceOp::mean: return dnnl::algorithm::reduction_mean;
    case ReduceOp::max: return dnnl::algorithm::reduction_max;
    case ReduceOp::min: return dnnl::algorithm::reduction_min;
  }
  return dnnl::algorithm::undef;
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& src, const std::vector<int64_t>& axes, bool keepdim) {
  const char* name = reduce_name(op);
  if (is_emulated(src))
    return emulate(name, src.dtype(), [&] { return reduce(op, widen(src), axes, keepdim); });
  require_compute_dtype(name, src.dtype());
  const Shape& shape = src.shape();
  const auto rank = static_cast<int64_t>(shape.size());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= rank || (i > 0 && axes[i] <= axes[i - 1]))
      throw Error(Status::invalid_argument(
          std::string(name) + ": axes " + shape_str(Shape(axes)) + " for src " + shape_str(shape) +
          " must be sorted, unique and in 0.." + std::to_string(rank - 1)));
  if (axes.empty()) return reorder(src, src.dtype(), MemoryFormat::contiguous);

  Shape keep_shape = shape, out_shape;
  int64_t count = 1;
  for (int64_t d = 0, i = 0; d < rank; ++d) {
    const bool reduced = i < static_cast<int64_t>(axes.size()) && axes[i] == d;
    if (reduced) {
      ++i;
      count *= shape[d];
      keep_shape[d] = 1;
      if (keepdim) out_shape.push_back(1);
    } else {
      out_shape.push_back(shape[d]);
    }
  }
  const DType dt = src.dtype();
  Tensor dst = Tensor::empty(keep_shape, dt);
  auto finish = [&](Tensor t) {
    return keepdim ? t : t.as_strided(out_shape, contiguous_strides(out_shape), 0);
  };
  if (dst.numel() == 0) return finish(dst);
  if (count == 0) {
    if (op == ReduceOp::max || op == ReduceOp::min)
      throw Error(Status::invalid_argument(
          std::string(name) + ": axes " + shape_str(Shape(axes)) + " of src " + shape_str(shape) +
          " hold no elements; max/min of an empty set is undefined"));
    dst.fill_(op == ReduceOp::mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return finish(dst);
  }
  // A sum over leading axes of a row-major f32/bf16 tensor (the gradient of a broadcast
  // operand: the GPT's position embedding, a bias) is the column sums of a [count, rest]
  // matrix: oneDNN 2.6 runs that shape on its ref:any reduction (1.7 ms at [16, 128, 128]);
  // cpu::column_sums_f32 reads each element once, accumulating in f32 as oneDNN does, and
  // rounds once.
  const bool leading = axes.back() == static_cast<int64_t>(axes.size()) - 1;
  if (op == ReduceOp::sum && leading && src.is_contiguous() && (dt == DType::f32 || dt == DType::bf16)) {
    const Tensor sums = cpu::column_sums_f32(src.as_strided({count, dst.numel()}, {dst.numel(), 1}, src.storage_offset()));
    dst.copy_(sums.to(dt).as_strided(keep_shape, contiguous_strides(keep_shape), 0));
    return finish(dst);
  }
  const Tensor x = src.is_dense() ? src : in_format(src, MemoryFormat::contiguous);
  const dnnl_md src_md = md_of(x), dst_md = md_of(dst);
  PrimKey key(PrimKind::reduction);
  key.add(static_cast<int64_t>(algorithm_of(op))).add(src_md).add(dst_md);
  auto e = cached<ReduceEntry>(key, [&] {
    auto entry = std::make_shared<ReduceEntry>();
    try {
      dnnl::reduction::desc desc(algorithm_of(op), src_md, dst_md, 0.f, 0.f);
      dnnl::reduction::primitive_desc pd(desc, cpu_engine());
      entry->prim = make_primitive<dnnl::reduction>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, std::string(name) + " " + dtype_name(dt) + " src " + describe(x) +
                            " axes " + shape_str(Shape(axes)));
    }
    entry->args = {{DNNL_ARG_SRC, unbound_memory(src_md)}, {DNNL_ARG_DST, unbound_memory(dst_md)}};
    dispatch_log(std::string(name) + " " + dtype_name(dt), entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC, x.data());
  e->bind(DNNL_ARG_DST, dst.data());
  e->prim.execute(cpu_stream(), e->args);
  return finish(dst);
}

}  // namespace mixprec::backend::onednn
