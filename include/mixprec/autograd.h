// autograd.h: grad mode. The graph itself is built by ops (src/autograd/node.h) and run
// by Tensor::backward.
#pragma once

namespace mixprec {

// While a NoGradGuard lives on this thread, ops record no graph (inference, optimizer
// updates, evaluation).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

bool grad_mode_enabled();

}  // namespace mixprec
