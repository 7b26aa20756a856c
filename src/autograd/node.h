// node.h: one recorded op in the define-by-run graph. An output tensor owns its Node
// (grad_fn); the Node points back at its inputs' Nodes (or, for leaves, at the leaf),
// never at its output, so the graph is a DAG of shared_ptrs with no cycles.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/tensor.h"

namespace mixprec {

// Where the gradient of one input goes: into the input's own grad_fn (a non-leaf), or
// into a leaf's .grad. Capturing only these (not the input tensor) lets activations that
// backward does not need be freed during forward.
struct Edge {
  std::shared_ptr<Node> fn;  // non-leaf input: its producer
  Tensor leaf;               // leaf input that requires grad (params, user inputs)
  DType dtype = DType::f32;  // the input's dtype: its gradient arrives in this dtype
  bool active() const { return fn != nullptr || leaf.defined(); }
};

class Node {
 public:
  using BackwardFn = std::function<std::vector<Tensor>(const Tensor& diff_dst)>;
  Node(const char* name, std::vector<Edge> edges, BackwardFn fn)
      : name_(name), edges_(std::move(edges)), backward_(std::move(fn)) {}

  // One gradient per edge (undefined where that input needs none).
  std::vector<Tensor> backward(const Tensor& diff_dst) { return backward_(diff_dst); }
  const std::vector<Edge>& edges() const { return edges_; }
  const char* name() const { return name_; }
  // A node that converts its incoming gradient itself (cast: to its source's dtype) takes
  // it in any floating dtype: the engine then does not round a wider gradient down to the
  // node's output dtype first. This is what lets an autocast weight's f32 gradient (f32
  // accumulation in oneDNN) reach its f32 parameter without a bf16 round trip.
  bool takes_any_float_grad() const { return takes_any_float_grad_; }
  void set_takes_any_float_grad() { takes_any_float_grad_ = true; }
  // Frees everything backward captured (activations); called once the node has run. A
  // node that saves no tensors and feeds a leaf directly is kept (set_reusable): the cast
  // of a weight that autocast caches for its whole region, so that a second forward and
  // backward in the same region can run through it again, as PyTorch's can.
  bool released() const { return !backward_; }
  void release() {
    if (reusable_) return;
    backward_ = nullptr;
    edges_.clear();
  }
  void set_reusable() { reusable_ = true; }

 private:
  const char* name_;
  std::vector<Edge> edges_;
  BackwardFn backward_;
  bool takes_any_float_grad_ = false;
  bool reusable_ = false;
};

// True when grad mode is on and any of the inputs requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

// Attaches a Node to `out` whose edges are `inputs` (undefined inputs or inputs that
// need no grad get inactive edges, and backward's result for them is ignored).
void record_op(Tensor& out, const char* name, std::initializer_list<const Tensor*> inputs,
               Node::BackwardFn fn);

// The innermost LeafGradReadyHook's callback on this thread (null: none).
const std::function<void(const Tensor&)>* leaf_grad_ready_hook();

// Adds src into dst's buffer in place (same shape; dtype converted). Used for .grad.
void accumulate_into(Tensor& dst, const Tensor& src);

}  // namespace mixprec
