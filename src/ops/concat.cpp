// concat.cpp: cat and stack (promote policy: mixed dtypes join in the widest), forward
// and backward. Any number of inputs, so the autocast step and the graph edges are built
// here from a vector (record_op takes an initializer list).
#include <memory>

#include "autograd/node.h"
#include "ops/autocast_hook.h"
#include "ops/dispatch.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"

namespace mixprec {

namespace {

// The op's autocast row over all inputs (promote: the widest among them), then one common
// dtype (the kernel copies bytes).
std::vector<Tensor> promote_all(amp::OpId op, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out = inputs;
  ops_detail::autocast_inputs(op, std::span<Tensor>(out));
  DType common = out[0].dtype();
  for (const auto& x : out) common = promote_types(common, x.dtype());
  for (auto& x : out) x = x.to(common);
  return out;
}

void check_defined(const char* op, const std::vector<Tensor>& inputs) {
  if (inputs.empty())
    throw Error(
        Status::invalid_argument(std::string(op) + ": needs at least one tensor, got none"));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      throw Error(Status::invalid_argument(std::string(op) + ": tensor " + std::to_string(i) +
                                           " is undefined"));
}

int64_t normalize_dim(const char* op, int64_t dim, int64_t rank, const Shape& shape) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    throw Error(Status::invalid_argument(std::string(op) + ": dim " + std::to_string(dim) +
                                         " out of range for tensors of shape " + shape_str(shape) +
                                         " (expected in [" + std::to_string(-rank) + ", " +
                                         std::to_string(rank - 1) + "])"));
  return d;
}

bool any_input_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const auto& x : inputs)
    if (x.requires_grad()) return true;
  return false;
}

// record_op for a vector of inputs: one edge per input, active where it requires grad.
void record_vector_op(Tensor& out, const char* name, const std::vector<Tensor>& inputs,
                      Node::BackwardFn fn) {
  std::vector<Edge> edges(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    edges[i].dtype = inputs[i].dtype();
    if (inputs[i].grad_fn())
      edges[i].fn = inputs[i].grad_fn();
    else
      edges[i].leaf = inputs[i];
  }
  out.set_grad_fn(std::make_shared<Node>(name, std::move(edges), std::move(fn)));
}

// Joins inputs (one dtype, equal sizes except dim d) along d (backend/cpu/layout.h).
Tensor cat_impl(const char* name, const std::vector<Tensor>& inputs, int64_t d) {
  std::vector<Tensor> src(inputs.size());
  for (size_t t = 0; t < inputs.size(); ++t) src[t] = inputs[t].detach().contiguous();
  const DType dt = src[0].dtype();
  Tensor out = ops_detail::dispatch_cpu(name, dt, [&] { return backend::cpu::cat_forward(src, d); });
  if (any_input_requires_grad(inputs)) {
    std::vector<Shape> shapes;
    std::vector<bool> needs;
    for (const auto& x : inputs) {
      shapes.push_back(x.shape());
      needs.push_back(x.requires_grad());
    }
    record_vector_op(out, name, inputs, [shapes, needs, d](const Tensor& diff_dst) {
      return ops_detail::dispatch_cpu("cat_backward", diff_dst.dtype(),
                                      [&] { return backend::cpu::cat_backward(diff_dst, shapes, needs, d); });
    });
  }
  return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_defined("cat", tensors);
  const Shape& first = tensors[0].shape();
  const int64_t rank = int64_t(first.size());
  if (rank == 0)
    throw Error(Status::invalid_argument("cat: tensor 0 is zero-dimensional " + tensors[0].str() +
                                         " and cannot be concatenated (use stack)"));
  const int64_t d = normalize_dim("cat", dim, rank, first);
  for (size_t t = 1; t < tensors.size(); ++t) {
    const Shape& s = tensors[t].shape();
    bool fits = int64_t(s.size()) == rank;
    for (int64_t i = 0; fits && i < rank; ++i) fits = i == d || s[size_t(i)] == first[size_t(i)];
    if (!fits)
      throw Error(Status::invalid_argument(
          "cat: tensor " + std::to_string(t) + " has shape " + shape_str(s) + " but tensor 0 has " +
          shape_str(first) + " (sizes must match except in dim " + std::to_string(d) + ")"));
  }
  return cat_impl("cat", promote_all(amp::OpId::cat, tensors), d);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_defined("stack", tensors);
  const Shape& first = tensors[0].shape();
  const int64_t d = normalize_dim("stack", dim, int64_t(first.size()) + 1, first);
  for (size_t t = 1; t < tensors.size(); ++t)
    if (tensors[t].shape() != first)
      throw Error(Status::invalid_argument("stack: tensor " + std::to_string(t) + " has shape " +
                                           shape_str(tensors[t].shape()) + " but tensor 0 has " +
                                           shape_str(first) + " (all shapes must be equal)"));
  // stack = cat of the inputs with a size-1 dim inserted at d (differentiable reshapes).
  Shape unsqueezed = first;
  unsqueezed.insert(unsqueezed.begin() + d, 1);
  std::vector<Tensor> parts;
  const std::vector<Tensor> cast = promote_all(amp::OpId::stack, tensors);
  ops_detail::AutocastOff inside;  // stack's row is applied: the reshapes must not apply theirs
  for (const auto& x : cast) parts.push_back(reshape(x, unsqueezed));
  return cat_impl("stack", parts, d);
}

}  // namespace mixprec
