// layout.cpp: dtype casts, memory-format changes and reshapes, with their backward.
// Casts never go through oneDNN: its f16 reorder is a scalar path (limits.md §1.5).
#include <optional>

#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "ops/autocast_hook.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/cast_grad.h"
#include "ops/dispatch.h"

namespace mixprec {

using namespace backend;

Tensor cast(const Tensor& src, DType dtype) {
  if (src.dtype() == dtype) return src;
  Tensor in = src.is_dense() ? src : src.contiguous();
  Tensor out = ops_detail::route(
      "cast", src.dtype(), true, [&] { return cpu::convert_dense(in, dtype); }, ops_detail::no_kernel,
      [&] { return ref::reorder(in, dtype, in.is_channels_last() ? MemoryFormat::channels_last : MemoryFormat::contiguous); });
  if (is_floating(dtype)) record_cast(src, out);
  return out;
}

void record_cast(const Tensor& src, Tensor& out) {
  if (!any_requires_grad({&src})) return;
  const DType src_dtype = src.dtype();
  // Casting back to a leaf's dtype makes that leaf's gradient (an autocast weight cast:
  // f32 parameter -> bf16 copy), so it is charged as a gradient, not as an activation.
  const bool to_leaf = src.is_leaf();
  record_op(out, "cast", {&src}, [src_dtype, to_leaf](const Tensor& diff_dst) {
    std::optional<MemoryCategoryGuard> mg;
    if (to_leaf) mg.emplace(MemoryCategory::gradients);
    return std::vector<Tensor>{cast(diff_dst, src_dtype)};
  });
  out.grad_fn()->set_takes_any_float_grad();  // an f32 gradient for a bf16 copy passes as is
  // A leaf's cast saves nothing (its closure holds dtypes only) and its edge is the leaf:
  // autocast's cache hands the same copy to every forward of its region, and each
  // backward through it must find it whole (node.h).
  if (to_leaf) out.grad_fn()->set_reusable();
}

Tensor to_memory_format(const Tensor& src, MemoryFormat format) {
  Tensor out = ops_detail::dispatch(
      "reorder", src.dtype(), [&] { return onednn::reorder(src, src.dtype(), format); },
      [&] { return ref::reorder(src, src.dtype(), format); });
  if (any_requires_grad({&src})) {
    const MemoryFormat src_format = src.suggest_memory_format();
    record_op(out, "to_memory_format", {&src}, [src_format](const Tensor& diff_dst) {
      return std::vector<Tensor>{diff_dst.to_memory_format(src_format)};
    });
  }
  return out;
}

namespace {

// reshape after the caller's autocast row (reshape's or flatten's) was applied.
Tensor reshape_impl(const Tensor& src, const Shape& shape) {
  Shape resolved = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      if (infer_at >= 0)
        throw Error(Status::invalid_argument("reshape: only one dimension can be -1, got " +
                                             shape_str(shape)));
      infer_at = int64_t(i);
    } else {
      known *= resolved[i];
    }
  }
  if (infer_at >= 0 && known > 0) resolved[size_t(infer_at)] = src.numel() / known;
  if (shape_numel(resolved) != src.numel())
    throw Error(Status::invalid_argument("reshape: cannot view " + src.str() + " (" +
                                         std::to_string(src.numel()) + " elements) as " +
                                         shape_str(shape)));
  // A view when the memory is already in logical order; otherwise reorder first (a
  // channels-last activation flattened for a linear layer).
  Tensor in;
  if (src.is_contiguous()) {
    ops_detail::note_view("reshape", src.dtype());
    in = src.detach();
  } else {
    in = ops_detail::route(
        "reshape", src.dtype(), true, [&] { return src.detach().contiguous(); }, ops_detail::no_kernel,
        [&] { return ref::reorder(src.detach(), src.dtype(), MemoryFormat::contiguous); });
  }
  Tensor out = in.as_strided(resolved, contiguous_strides(resolved), in.storage_offset());
  if (any_requires_grad({&src})) {
    const Shape src_shape = src.shape();
    record_op(out, "reshape", {&src}, [src_shape](const Tensor& diff_dst) {
      return std::vector<Tensor>{reshape(diff_dst, src_shape)};
    });
  }
  return out;
}

}  // namespace

Tensor reshape(const Tensor& src, const Shape& shape) {
  return reshape_impl(ops_detail::autocast_input(amp::OpId::reshape, src), shape);
}

Tensor flatten(const Tensor& src_in, int64_t start_dim, int64_t end_dim) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::flatten, src_in);
  const int64_t n = src.dim();
  const int64_t s = start_dim < 0 ? start_dim + n : start_dim;
  const int64_t e = end_dim < 0 ? end_dim + n : end_dim;
  if (n == 0) return reshape_impl(src, {1});
  if (s < 0 || e >= n || s > e)
    throw Error(Status::invalid_argument("flatten: dims (" + std::to_string(start_dim) + ", " +
                                         std::to_string(end_dim) + ") out of range for " + src.str()));
  Shape shape;
  for (int64_t i = 0; i < s; ++i) shape.push_back(src.size(i));
  int64_t merged = 1;
  for (int64_t i = s; i <= e; ++i) merged *= src.size(i);
  shape.push_back(merged);
  for (int64_t i = e + 1; i < n; ++i) shape.push_back(src.size(i));
  return reshape_impl(src, shape);
}

Tensor transpose(const Tensor& src_in, int64_t dim0, int64_t dim1) {
  const Tensor src = ops_detail::autocast_input(amp::OpId::transpose, src_in);
  const int64_t n = src.dim();
  const int64_t a = dim0 < 0 ? dim0 + n : dim0, b = dim1 < 0 ? dim1 + n : dim1;
  if (a < 0 || a >= n || b < 0 || b >= n)
    throw Error(Status::invalid_argument("transpose: dims (" + std::to_string(dim0) + ", " +
                                         std::to_string(dim1) + ") out of range for " + src.str()));
  Shape shape = src.shape(), strides = src.strides();
  std::swap(shape[size_t(a)], shape[size_t(b)]);
  std::swap(strides[size_t(a)], strides[size_t(b)]);
  Tensor view = src.detach().as_strided(shape, strides, src.storage_offset());
  // The copy: core's strided copy (Tensor::copy_), or ref's reorder into row-major order.
  Tensor out = ops_detail::route(
      "transpose", src.dtype(), true,
      [&] {
        Tensor dense = Tensor::empty(shape, src.dtype());
        dense.copy_(view);
        return dense;
      },
      ops_detail::no_kernel, [&] { return ref::reorder(view, src.dtype(), MemoryFormat::contiguous); });
  if (any_requires_grad({&src})) {
    record_op(out, "transpose", {&src}, [a, b](const Tensor& diff_dst) {
      return std::vector<Tensor>{transpose(diff_dst, a, b)};
    });
  }
  return out;
}

}  // namespace mixprec
