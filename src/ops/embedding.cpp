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

// Each index of `indices` (integers, any shape) in [0, rows), flattened; errors name the op,
// the index, its position and the tensor it indexes.
std::vector<int64_t> checked_indices(const char* op, const Tensor& indices, int64_t rows, const Shape& indexed) {
  if (!indices.defined() ||
      (indices.dtype() != DType::i64 && indices.dtype() != DType::i32 && indices.dtype() != DType::u8))
    throw Error(Status::invalid_argument(std::string(op) + ": indices must be integers (i64), got " +
                                         (indices.defined() ? indices.str() : std::string("undefined"))));
  const Tensor flat = indices.is_contiguous() ? indices : indices.contiguous();
  std::vector<int64_t> idx(size_t(flat.numel()));
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t v = int64_t(flat.at(i));
    if (v < 0 || v >= rows)
      throw Error(Status::invalid_argument(std::string(op) + ": index " + std::to_string(v) + " at position " +
                                           std::to_string(i) + " is out of range [0, " + std::to_string(rows) +
                                           ") for " + shape_str(indexed)));
    idx[size_t(i)] = v;
  }
  return idx;
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight_in) {
  const Tensor weight = ops_detail::autocast_input(amp::OpId::embedding, weight_in);
  if (!weight.defined() || weight.dim() != 2 || !is_floating(weight.dtype()))
    throw Error(Status::invalid_argument("embedding: weight must be a floating [rows, dim] tensor, got " +
                                         (weight.defined() ? weight.str() : std::string("undefined"))));
  const std::vector<int64_t> idx =
      checked_indices("embedding", indices, weight.size(0), Shape{weight.size(0), weight.size(1)});
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

Tensor index_add(const Tensor& input_in, const Tensor& indices, const Tensor& source_in) {
  const std::vector<Tensor> in = ops_detail::autocast_inputs(amp::OpId::index_add, {input_in, source_in});
  const Tensor &input = in[0], &source = in[1];
  if (!input.defined() || !source.defined() || input.dim() < 1 || !is_floating(input.dtype()) ||
      source.dtype() != input.dtype())
    throw Error(Status::invalid_argument("index_add: input and source must be floating tensors of one dtype, got " +
                                         (input.defined() ? input.str() : std::string("undefined")) + " and " +
                                         (source.defined() ? source.str() : std::string("undefined"))));
  const Shape& shape = input.shape();
  Shape rows_of_source = shape;
  if (indices.dim() > 1)
    throw Error(Status::invalid_argument("index_add: indices must be 1-D, got " + indices.str()));
  rows_of_source[0] = indices.numel();
  if (source.shape() != rows_of_source)
    throw Error(Status::invalid_argument("index_add: source " + shape_str(source.shape()) + " must be " +
                                         shape_str(rows_of_source) + " (one row per index, input's row shape)"));
  const int64_t rows = shape[0], width = rows == 0 ? 0 : input.numel() / rows;
  const std::vector<int64_t> idx = checked_indices("index_add", indices, rows, shape);
  const DType dtype = input.dtype();
  // index_add's row was applied above; the ops it is made of (add, reshape) run as outside
  // autocast, so that their rows do not act on it (autocast_hook.h).
  ops_detail::AutocastOff off;
  if (idx.empty()) return add(input, Tensor::zeros(shape, dtype));  // nothing added (a new tensor, as PyTorch's)
  // The rows summed per target, as embedding's backward sums a gradient (one kernel).
  Tensor added = ops_detail::dispatch_cpu("index_add", dtype, [&] {
    return backend::cpu::embedding_backward(source.detach().contiguous(), idx, rows, dtype);
  });
  if (any_requires_grad({&source})) {
    const Shape src_shape = source.shape();
    record_op(added, "index_add", {&source}, [idx, width, src_shape](const Tensor& diff_dst) {
      const Tensor g = diff_dst.contiguous().reshape({diff_dst.numel() / std::max<int64_t>(width, 1), width});
      return std::vector<Tensor>{ops_detail::dispatch_cpu("index_add_backward", g.dtype(), [&] {
        return backend::cpu::embedding_forward(g, idx, src_shape);
      })};
    });
  }
  return add(input, reshape(added, shape));
}

}  // namespace mixprec
