// autograd.h: grad mode. The graph itself is built by ops (src/autograd/node.h) and run
// by Tensor::backward.
#pragma once
#include <functional>

namespace mixprec {

class Tensor;

bool grad_mode_enabled();

// Sets this thread's grad mode until the next change (PyTorch's torch.set_grad_enabled(mode)
// called as a function); the guards below restore what they found when they end.
void set_grad_mode(bool enabled);

// Sets this thread's grad mode to `enabled` while it lives, then restores the previous one:
// PyTorch's set_grad_enabled / enable_grad (a graph recorded inside a no_grad region).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// While a NoGradGuard lives on this thread, ops record no graph (inference, optimizer
// updates, evaluation).
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

// While a LeafGradReadyHook lives on this thread, Tensor::backward calls `on_ready(leaf)`
// as soon as a leaf's .grad is complete for this backward: every edge into that leaf in the
// graph has delivered its gradient (a weight used twice, as a tied embedding, is ready after
// its second use). A leaf whose .grad is still undefined then (no gradient reached it) is
// not reported.
// Data-parallel training uses it to start reducing gradients while backward still runs
// (PyTorch DDP's autograd hooks).
class LeafGradReadyHook {
 public:
  explicit LeafGradReadyHook(std::function<void(const Tensor& leaf)> on_ready);
  ~LeafGradReadyHook();
  LeafGradReadyHook(const LeafGradReadyHook&) = delete;
  LeafGradReadyHook& operator=(const LeafGradReadyHook&) = delete;

 private:
  std::function<void(const Tensor&)> on_ready_;
  const std::function<void(const Tensor&)>* previous_;
};

}  // namespace mixprec
