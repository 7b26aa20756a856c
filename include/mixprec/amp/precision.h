// precision.h: precision presets (the O0-O3 levels Apex users know) and f32 master
// weights. A preset names the dtype of each precision role: param_dtype (model weights),
// compute_dtype (what matrix ops run in), and whether f32 masters and loss scaling are used.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::amp {

struct Preset {
  std::string name;                      // "amp-bf16", ...
  const char* level;                     // "O0".."O3"
  std::optional<DType> autocast_dtype;   // O1: ops pick their dtype from the policy table
  DType param_dtype = DType::f32;        // dtype of the model's weights
  DType compute_dtype = DType::f32;      // dtype matrix work runs in
  bool master_weights = false;           // O2: the optimizer updates f32 copies
  bool loss_scaling = false;             // GradScaler on (f16 with f32 master weights)
  bool keep_norm_fp32 = false;           // O2: normalisation layers stay f32
  const char* description;
};

// fp32, amp-bf16, amp-fp16, o2-bf16, o2-fp16, pure-bf16, pure-fp16, in that order.
const std::vector<Preset>& all_presets();
// Accepts the names above, "O0".."O3" (O1/O2 mean the bf16 variants on CPU), the aliases
// below and a jmp-style policy "params=float32,compute=bfloat16,output=float32".
StatusOr<Preset> preset_by_name(const std::string& name);
std::string preset_names();  // "fp32, amp-bf16, ..." for messages and --help
// Names users bring from PyTorch Lightning / Accelerate ("bf16-mixed", "16-mixed",
// "bf16-true", "bf16", "fp16", "f32", "32", ...) and O0-O3, each with the preset it means.
const std::vector<std::pair<std::string, std::string>>& preset_aliases();

// f32 master copies of 16-bit model weights (O2). The optimizer steps the masters; the
// model's 16-bit weights are refreshed from them after every applied step, so each 16-bit
// weight always equals its master rounded to nearest even.
class MasterWeights {
 public:
  explicit MasterWeights(const std::vector<std::pair<std::string, Tensor>>& model_params);
  // f32 tensors (requires_grad) to hand to the optimizer, in model_params order. An f32
  // model parameter (a normalisation layer under O2) is its own master.
  const std::vector<Tensor>& masters() const { return masters_; }
  std::vector<std::pair<std::string, Tensor>> named_masters() const;
  // Moves the model's gradients into the masters' .grad, accumulating in f32 (gradient
  // accumulation over micro-batches never sums in 16 bits), and clears the model's.
  void accumulate_grads();
  // model weight = round(master) for every 16-bit weight.
  void copy_to_model();
  // What a fused optimizer step over masters() reads and writes, in masters() order (both
  // spans sized masters().size(), owned by the caller so a steady step allocates nothing):
  // grads[i] is the master's own f32 .grad when there is one (an f32 weight, or after
  // accumulate_grads()), else the model weight's 16-bit .grad, read directly without the f32
  // copy; rounded_out[i] is the 16-bit model weight that receives round(master) in the same
  // pass (undefined for an f32 weight, which is its own master). Pass both to
  // GradScaler::step_fused / Optimizer::step_fused instead of accumulate_grads() + step() +
  // copy_to_model() when there is one micro-batch. invalid_argument if a weight has both
  // an accumulated f32 gradient and a newer 16-bit one (accumulate_grads() was not called).
  void fused_step_inputs(std::span<Tensor> grads, std::span<Tensor> rounded_out) const;
  void zero_grad();

 private:
  std::vector<std::pair<std::string, Tensor>> model_;
  std::vector<Tensor> masters_;
};

}  // namespace mixprec::amp
