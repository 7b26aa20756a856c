// grad_mode.cpp: the thread-local switches behind GradModeGuard (NoGradGuard is one) and
// LeafGradReadyHook, and graph recording.
#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd/autograd.h"

namespace mixprec {
namespace {
thread_local bool t_grad_enabled = true;
thread_local const std::function<void(const Tensor&)>* t_leaf_ready = nullptr;
}  // namespace

bool grad_mode_enabled() { return t_grad_enabled; }
void set_grad_mode(bool enabled) { t_grad_enabled = enabled; }
GradModeGuard::GradModeGuard(bool enabled) : previous_(t_grad_enabled) { t_grad_enabled = enabled; }
GradModeGuard::~GradModeGuard() { t_grad_enabled = previous_; }

LeafGradReadyHook::LeafGradReadyHook(std::function<void(const Tensor&)> on_ready)
    : on_ready_(std::move(on_ready)), previous_(t_leaf_ready) {
  t_leaf_ready = &on_ready_;
}
LeafGradReadyHook::~LeafGradReadyHook() { t_leaf_ready = previous_; }
const std::function<void(const Tensor&)>* leaf_grad_ready_hook() { return t_leaf_ready; }

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

void record_op(Tensor& out, const char* name, std::initializer_list<const Tensor*> inputs,
               Node::BackwardFn fn) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    Edge e;
    if (t && t->defined() && t->requires_grad()) {
      e.dtype = t->dtype();
      if (t->grad_fn())
        e.fn = t->grad_fn();
      else
        e.leaf = *t;
    }
    edges.push_back(std::move(e));
  }
  out.set_grad_fn(std::make_shared<Node>(name, std::move(edges), std::move(fn)));
}

}  // namespace mixprec
