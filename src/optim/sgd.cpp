// sgd.cpp: SGD with momentum, dampening, nesterov and L2 weight decay (torch.optim.SGD).
#include "mixprec/optim/optim.h"
#include "mixprec/core/status.h"
#include "optim/update_kernels.h"

namespace mixprec::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  if (options.nesterov && (options.momentum <= 0.0 || options.dampening != 0.0))
    throw Error(Status::invalid_argument("SGD: nesterov needs momentum > 0 and dampening 0"));
  if (options.momentum < 0.0 || options.weight_decay < 0.0)
    throw Error(Status::invalid_argument("SGD: momentum and weight_decay must be >= 0"));
  momentum_buffers_.resize(params_.size());
}

void SGD::update(size_t index, Tensor& param, const Tensor& grad) {
  update_fused(index, param, UpdateInput{grad});
}

void SGD::update_fused(size_t index, Tensor& param, const UpdateInput& in) {
  Tensor& buf = momentum_buffers_[index];
  // PyTorch starts the buffer as a clone of the first gradient this parameter sees (which
  // need not come on step 1); a restored buffer is continued.
  const bool first_step = !buf.defined();
  if (options_.momentum != 0.0 && first_step) buf = Tensor::empty_like(param);
  sgd_update(param, in, buf, lr_, options_, first_step);
}

std::map<std::string, Tensor> SGD::state_tensors() const {
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < momentum_buffers_.size(); ++i)
    if (momentum_buffers_[i].defined()) out["momentum_buffer." + std::to_string(i)] = momentum_buffers_[i];
  return out;
}

}  // namespace mixprec::optim

namespace mixprec::optim {
void SGD::load_state_tensors(const std::map<std::string, Tensor>& state) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string key = "momentum_buffer." + std::to_string(i);
    auto it = state.find(key);
    momentum_buffers_[i] = it == state.end() ? Tensor() : restored_like(params_[i], it->second, key);
  }
}
}  // namespace mixprec::optim
