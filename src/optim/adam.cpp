// adam.cpp: Adam and AdamW (torch.optim.Adam / AdamW, single-tensor path); one pass per
// parameter, fused with unscaling and the 16-bit weight copy when asked (update_kernels.h).
#include "mixprec/optim/optim.h"
#include "mixprec/core/status.h"
#include "optim/update_kernels.h"

namespace mixprec::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {
  if (!(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1))
    throw Error(Status::invalid_argument("Adam: betas must be in [0, 1), got (" +
                                         std::to_string(options.beta1) + ", " +
                                         std::to_string(options.beta2) + ")"));
  if (!(options.eps >= 0) || !(options.weight_decay >= 0))
    throw Error(Status::invalid_argument("Adam: eps and weight_decay must be >= 0"));
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  max_exp_avg_sq_.resize(params_.size());
}

void Adam::update(size_t index, Tensor& param, const Tensor& grad) {
  update_fused(index, param, UpdateInput{grad});
}

void Adam::update_fused(size_t index, Tensor& param, const UpdateInput& in) {
  // Zero state laid out like the parameter (PyTorch: zeros_like(p, memory_format=preserve)).
  auto zeros_like_param = [&param] {
    Tensor t = Tensor::zeros(param.shape(), param.dtype());
    return param.suggest_memory_format() == MemoryFormat::channels_last
               ? t.to_memory_format(MemoryFormat::channels_last)
               : t;
  };
  if (!exp_avg_[index].defined()) {
    exp_avg_[index] = zeros_like_param();
    exp_avg_sq_[index] = zeros_like_param();
  }
  if (options_.amsgrad && !max_exp_avg_sq_[index].defined()) max_exp_avg_sq_[index] = zeros_like_param();
  adam_update(param, in, exp_avg_[index], exp_avg_sq_[index], max_exp_avg_sq_[index], lr_, options_, decoupled_,
              step_count_);
}

std::map<std::string, Tensor> Adam::state_tensors() const {
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < exp_avg_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    out["exp_avg." + std::to_string(i)] = exp_avg_[i];
    out["exp_avg_sq." + std::to_string(i)] = exp_avg_sq_[i];
    if (max_exp_avg_sq_[i].defined()) out["max_exp_avg_sq." + std::to_string(i)] = max_exp_avg_sq_[i];
  }
  return out;
}

}  // namespace mixprec::optim

namespace mixprec::optim {
void Adam::load_state_tensors(const std::map<std::string, Tensor>& state) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string m = "exp_avg." + std::to_string(i), v = "exp_avg_sq." + std::to_string(i);
    const bool has_m = state.count(m), has_v = state.count(v);
    if (has_m != has_v)
      throw Error(Status::invalid_argument("optimizer state: '" + m + "' and '" + v + "' must come together"));
    exp_avg_[i] = has_m ? restored_like(params_[i], state.at(m), m) : Tensor();
    exp_avg_sq_[i] = has_v ? restored_like(params_[i], state.at(v), v) : Tensor();
    // amsgrad's running maximum comes with the moments; without amsgrad it is not used.
    const std::string mx = "max_exp_avg_sq." + std::to_string(i);
    max_exp_avg_sq_[i] = Tensor();
    if (options_.amsgrad && has_m) {
      if (!state.count(mx))
        throw Error(Status::invalid_argument("optimizer state: '" + mx + "' missing (amsgrad needs it with '" + m +
                                             "')"));
      max_exp_avg_sq_[i] = restored_like(params_[i], state.at(mx), mx);
    }
  }
}
}  // namespace mixprec::optim
