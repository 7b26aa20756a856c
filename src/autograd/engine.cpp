// engine.cpp: reverse-mode backward. Nodes run in reverse topological order, each once,
// after all gradients flowing into it have been summed; leaves accumulate into .grad.
// Tensor::backward (src/ops/tensor_backward.cpp) checks its arguments, turns grad mode and
// autocast off and calls run_backward here with ops' add to sum two gradients: autograd
// comes before ops in the layers, so the engine is handed the op instead of including it.
#include "autograd/engine.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "core/convert.h"
#include "core/strided.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/core/status.h"

namespace mixprec {
namespace {

// Reverse post-order of the DAG below `root` (iterative: deep graphs must not overflow
// the stack).
std::vector<Node*> topological_order(Node* root) {
  std::vector<Node*> post;
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    const auto& edges = node->edges();
    if (next < edges.size()) {
      Node* child = edges[next++].fn.get();
      if (child && seen.insert(child).second) stack.push_back({child, 0});
    } else {
      post.push_back(node);
      stack.pop_back();
    }
  }
  return {post.rbegin(), post.rend()};
}

// The gradient for an input must have the input's dtype and shape, except where the
// receiving node converts it itself (Node::takes_any_float_grad). A leaf's gradient is
// charged to gradients, as accumulate_leaf charges it.
Tensor conform(Tensor g, const Edge& e, const char* node_name) {
  if (g.dtype() == e.dtype) return g;
  if (e.fn && e.fn->takes_any_float_grad() && is_floating(g.dtype())) return g;
  NoGradGuard ng;
  std::optional<MemoryCategoryGuard> mg;
  if (e.leaf.defined()) mg.emplace(MemoryCategory::gradients);
  return g.to(e.dtype);
}

// True when g can become leaf's .grad as it is: nothing else holds its buffer, and it is laid
// out as a fresh gradient buffer would be (the parameter's dtype, shape and memory format,
// dense from the buffer's start).
bool adoptable(const Tensor& leaf, const Tensor& g) {
  if (!g.owns_buffer_alone() || g.dtype() != leaf.dtype() || g.shape() != leaf.shape() || g.storage_offset() != 0)
    return false;
  return g.strides() == strides_for(leaf.shape(), leaf.suggest_memory_format()) &&
         g.storage()->bytes() == size_t(g.numel()) * dtype_size(g.dtype());
}

void accumulate_leaf(Tensor leaf, Tensor g) {
  MemoryCategoryGuard mg(MemoryCategory::gradients);
  Tensor& slot = leaf.mutable_grad();
  if (!slot.defined()) {
    if (adoptable(leaf, g)) {
      // The op's fresh result becomes the gradient: one copy of every weight gradient less
      // per step. It was charged to the category in force when backward made it.
      g.storage()->recharge(MemoryCategory::gradients);
      slot = std::move(g);
      return;
    }
    // A fresh buffer laid out like the parameter, so optimizers walk both linearly.
    Tensor fresh = Tensor::empty(leaf.shape(), leaf.dtype(), leaf.suggest_memory_format());
    fresh.copy_(g);
    slot = fresh;
  } else {
    accumulate_into(slot, g);
  }
}

}  // namespace

void accumulate_into(Tensor& dst, const Tensor& src) {
  if (dst.shape() != src.shape())
    throw Error(Status::invalid_argument("gradient accumulation: shapes " + shape_str(dst.shape()) +
                                         " and " + shape_str(src.shape()) + " differ"));
  if (dst.dtype() == DType::f32 && src.dtype() == DType::f32 && dst.strides() == src.strides() &&
      dst.is_dense()) {
    float* d = dst.data_ptr<float>();
    const float* s = src.data_ptr<float>();
    const int64_t n = dst.numel();
#pragma omp parallel for simd if (n > 100000)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  } else {
    const std::vector<double> a = dst.to_vector_f64(), b = src.to_vector_f64();
    std::vector<double> sum(a.size());
    for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
    Tensor tmp = Tensor::from_vector_f64(sum, dst.shape(), DType::f64);
    dst.copy_(tmp);
  }
  dst.storage()->bump_version();
}

void run_backward(const Tensor& root, const Tensor& seed, GradientSum sum) {
  if (root.grad_fn() && root.grad_fn()->released())
    throw Error(Status::invalid_argument(
        "backward: trying to run backward through the graph a second time (" + root.str() +
        "'s graph was freed by an earlier backward)"));
  if (!root.grad_fn()) {  // a leaf: d(self)/d(self) = seed
    accumulate_leaf(root, seed);
    if (const auto* on_ready = leaf_grad_ready_hook()) (*on_ready)(root);
    return;
  }
  std::unordered_map<Node*, Tensor> pending;
  pending[root.grad_fn().get()] = seed;
  // Hold the nodes alive while we run them: releasing one frees its edges.
  std::vector<std::shared_ptr<Node>> keep;
  const std::vector<Node*> order = topological_order(root.grad_fn().get());
  // With a LeafGradReadyHook: how many edges into each leaf are still to run. A leaf is
  // complete when its last edge has run (or been skipped).
  const auto* on_ready = leaf_grad_ready_hook();
  std::unordered_map<const TensorImpl*, int> edges_left;
  if (on_ready)
    for (Node* node : order)
      for (const auto& e : node->edges())
        if (e.leaf.defined()) ++edges_left[e.leaf.impl()];
  auto leaf_edges_done = [&](Node* node) {
    if (!on_ready) return;
    for (const auto& e : node->edges())
      if (e.leaf.defined() && --edges_left[e.leaf.impl()] == 0 && e.leaf.grad().defined()) (*on_ready)(e.leaf);
  };
  for (Node* node : order) {
    for (const auto& e : node->edges())
      if (e.fn) keep.push_back(e.fn);
    auto it = pending.find(node);
    if (it == pending.end()) {  // no gradient reached it (e.g. only through ignored inputs)
      leaf_edges_done(node);
      node->release();
      continue;
    }
    if (node->released())
      throw Error(Status::invalid_argument(
          std::string("backward: trying to run backward through the graph a second time (") +
          node->name() + " was already freed by an earlier backward)"));
    Tensor diff_dst = std::move(it->second);
    pending.erase(it);
    std::vector<Tensor> grads = node->backward(diff_dst);
    diff_dst = Tensor();  // a pass-through node's result is then held by grads alone (adoptable)
    const auto& edges = node->edges();
    MIXPREC_CHECK(grads.size() == edges.size(),
                  std::string(node->name()) + " backward returned the wrong number of gradients");
    for (size_t i = 0; i < edges.size(); ++i) {
      if (!edges[i].active() || !grads[i].defined()) continue;
      Tensor g = conform(std::move(grads[i]), edges[i], node->name());
      if (edges[i].leaf.defined()) {
        accumulate_leaf(edges[i].leaf, std::move(g));
      } else {
        auto [slot, inserted] = pending.try_emplace(edges[i].fn.get(), g);
        if (!inserted) slot->second = sum(slot->second, g);
      }
    }
    leaf_edges_done(node);
    node->release();
  }
}

}  // namespace mixprec
