// embedding.cpp: embedding lookup (F.embedding): rows of a [rows, dim] weight picked by
// integer indices; keep row of the policy table (it runs in the weight's dtype, as in
// PyTorch's autocast). Backward scatters the gradient back into the weight's rows,
// accumulating in f32 (backend/cpu/embedding.h), so a byte-level language model's often
// repeated tokens lose nothing to 16-bit sums. Indices get no gradient.
#include "autograd/node.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/autocast_hook.h"
#include "ops/dispatch.h"

namespace mixprec {

namespace {

std::vector<int64_t> checked_indices(const Tensor& indices, const Tensor& weight) {
  if (!weight.defined() || weight.dim() != 2 || !is_floating(weight.dtype()))
    throw Error(Status::invalid_argument("embedding: weight must be a floating [rows, dim] tensor, got " +
                                         (weight.defined() ? weight.str() : std::string("undefined"))));
  if (!indices.defined() ||
      (indices.dtype() != DType::i64 && indices.dtype() != DType::i32 && indices.dtype() != DType::u8))
    throw Error(Status::invalid_argument("embedding: indices must be integers (i64), got " +
                                         (indices.defined() ? indices.str() : std::string("undefined"))));
  const int64_t rows = weight.size(0);
  const Tensor flat = indices.is_contiguous() ? indices : indices.contiguous();
  std::vector<int64_t> idx(size_t(flat.numel()));
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t v = int64_t(flat.at(i));
    if (v < 0 || v >= rows)
      throw Error(Status::invalid_argument("embedding: index " + std::to_string(v) + " at position " +
                                           std::to_string(i) + " is out of range [0, " + std::to_string(rows) +
                                           ") for weight " + shape_str(weight.shape())));
    idx[size_t(i)] = v;
  }
  return idx;
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight_in) {
  const Tensor weight = ops_detail::autocast_input(amp::OpId::embedding, weight_in);
  const std::vector<int64_t> idx = checked_indices(indices, weight);
  Shape shape = indices.shape();
  shape.push_back(weight.size(1));
  Tensor out = ops_detail::dispatch_cpu("embedding", weight.dtype(),
                                        [&] { return backend::cpu::embedding_forward(weight.detach(), idx, shape); });
  if (any_requires_grad({&weight})) {
    const int64_t rows = weight.size(0);
    const DType dtype = weight.dtype();
    record_op(out, "embedding", {&weight}, [idx, rows, dtype](const Tensor& diff_dst) {
      return std::vector<Tensor>{ops_detail::dispatch_cpu(
          "embedding_backward", dtype, [&] { return backend::cpu::embedding_backward(diff_dst, idx, rows, dtype); })};
    });
  }
  return out;
}

}  // namespace mixprec
