// master_weights.cpp: f32 masters for 16-bit weights (O2): the masters, f32 gradient
// accumulation, the rounded copy back, and the inputs of the fused step that skips both.
#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/status.h"

namespace mixprec::amp {

MasterWeights::MasterWeights(const std::vector<std::pair<std::string, Tensor>>& model_params)
    : model_(model_params) {
  NoGradGuard ng;
  MemoryCategoryGuard mg(MemoryCategory::optimizer_state);
  for (const auto& [name, p] : model_) {
    if (p.dtype() == DType::f32) {
      masters_.push_back(p);
      continue;
    }
    Tensor m = Tensor::empty(p.shape(), DType::f32, p.suggest_memory_format());
    m.copy_(p);
    m.requires_grad_(true);
    masters_.push_back(m);
  }
}

std::vector<std::pair<std::string, Tensor>> MasterWeights::named_masters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < model_.size(); ++i) out.emplace_back(model_[i].first, masters_[i]);
  return out;
}

void MasterWeights::accumulate_grads() {
  NoGradGuard ng;
  MemoryCategoryGuard mg(MemoryCategory::gradients);
  for (size_t i = 0; i < model_.size(); ++i) {
    Tensor p = model_[i].second;
    Tensor& m = masters_[i];
    if (p.same(m)) continue;  // f32 parameter: its grad is already the master's
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor& slot = m.mutable_grad();
    if (!slot.defined()) {
      slot = Tensor::empty(m.shape(), DType::f32, m.suggest_memory_format());
      slot.copy_(g);
    } else {
      accumulate_into(slot, g);
    }
    p.set_grad(Tensor());
  }
}

void MasterWeights::copy_to_model() {
  NoGradGuard ng;
  for (size_t i = 0; i < model_.size(); ++i) {
    Tensor p = model_[i].second;
    if (p.same(masters_[i])) continue;
    p.copy_(masters_[i]);  // rounds to nearest even; bumps p's version (cast caches)
  }
}

void MasterWeights::fused_step_inputs(std::span<Tensor> grads, std::span<Tensor> rounded_out) const {
  if (grads.size() != masters_.size() || rounded_out.size() != masters_.size())
    throw Error(Status::invalid_argument("MasterWeights::fused_step_inputs: spans of " + std::to_string(grads.size()) +
                                         " and " + std::to_string(rounded_out.size()) + ", expected " +
                                         std::to_string(masters_.size())));
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i].second;
    const Tensor& m = masters_[i];
    if (p.same(m)) {  // f32 weight: its own master
      grads[i] = m.grad();
      rounded_out[i] = Tensor();
      continue;
    }
    Tensor master_grad = m.grad(), model_grad = p.grad();
    if (master_grad.defined() && model_grad.defined())
      throw Error(Status::invalid_argument("MasterWeights::fused_step_inputs: '" + model_[i].first +
                                           "' has an accumulated f32 gradient and a newer " +
                                           dtype_name(model_grad.dtype()) +
                                           " one; call accumulate_grads() after every backward"));
    grads[i] = master_grad.defined() ? master_grad : model_grad;
    rounded_out[i] = p;
  }
}

void MasterWeights::zero_grad() {
  for (auto& m : masters_) m.set_grad(Tensor());
  for (auto& [name, p] : model_) p.set_grad(Tensor());
}

}  // namespace mixprec::amp
