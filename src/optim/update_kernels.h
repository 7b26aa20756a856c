// update_kernels.h: the elementwise parameter updates, one pass over each tensor, in the
// order of PyTorch 1.13's single-tensor implementations (so results match it closely).
#pragma once
#include <string>

#include "mixprec/tensor.h"

namespace mixprec::optim {

// param, grad and buf share dtype and layout. buf is updated when momentum != 0.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& buf, double lr, double momentum,
                double dampening, double weight_decay, bool nesterov, bool first_step);

// step is 1-based (after increment), as PyTorch's state['step'].
void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool decoupled, int64_t step);

// A checkpointed state tensor copied into a fresh buffer laid out like `param` (dtype and
// memory format), charged to optimizer state; invalid_argument naming `name` on a shape
// mismatch.
Tensor restored_like(const Tensor& param, const Tensor& src, const std::string& name);

}  // namespace mixprec::optim
