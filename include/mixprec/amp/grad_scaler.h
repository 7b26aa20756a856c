// grad_scaler.h: dynamic loss scaling (torch.amp.GradScaler's API, defaults and update
// rule), plus what PyTorch lacks: min/max scale, hysteresis, step counters and a report of
// which parameters overflowed.
//
//   scaler.scale(loss).backward();
//   scaler.unscale(opt);                 // optional: before clip_grad_norm_
//   bool stepped = scaler.step(opt);     // skips the update if any gradient is inf/NaN
//   scaler.update();
//
// step_fused(opt, grads, rounded_out) is the one-pass form for mixed precision: a read-only
// inf/NaN check, then an optimizer pass that unscales as it reads (see Optimizer::step_fused).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mixprec/optim/optim.h"  // the scaler drives an optimizer: optim comes before amp in the layers
#include "mixprec/core/tensor.h"

namespace mixprec::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
  // Beyond PyTorch:
  std::optional<double> min_scale;  // never back off below (DeepSpeed / Megatron)
  std::optional<double> max_scale;  // never grow above (Apex: 2^24)
  int64_t hysteresis = 1;           // overflows tolerated before backing off (Megatron); 1 = PyTorch
  bool allow_fp16_grads = false;    // PyTorch refuses to unscale f16 gradients
};

// A parameter whose gradient held inf/NaN on a skipped step.
struct NonFiniteGrad {
  std::string name;          // from name_parameters(), or "param.<index>"
  int64_t count = 0;         // non-finite elements
  int64_t first_index = -1;  // flat index of the first one
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale, computed in f32 (f16 would overflow at 65504). Pass-through if disabled.
  Tensor scale(const Tensor& loss) const;
  // Divides the optimizer's gradients by the scale in place and records whether any was
  // inf/NaN (one fused pass). At most once per optimizer between update()s: a second call
  // throws Error, as PyTorch's unscale_ does.
  void unscale(optim::Optimizer& opt);
  // Unscales if needed, then runs opt.step() unless a gradient was inf/NaN. Returns whether
  // the update was applied. A second step() before update() throws.
  bool step(optim::Optimizer& opt);
  // The fused form of [unscale(opt)] + step(opt): a read-only inf/NaN check of grads (the
  // same skip decision and non-finite report as unscale()), then, unless one was found,
  // opt.step_fused(grads, 1/scale, rounded_out), which unscales as it reads and updates in
  // the same pass; results are bit-identical to the two-pass form. grads[i] is the gradient
  // of opt.params()[i] (for an O2 master: its model weight's bf16/f16 .grad) and is left as
  // it was (still scaled). After an explicit unscale(opt) (to clip), pass the gradients it
  // unscaled: they are used as they are. Same stage rules, counters and return value as
  // step(). With the scaler enabled the parameters must be f32 (or f64): a 16-bit gradient
  // unscaled in place is rounded, which the fused pass does not do; use unscale + step there.
  bool step_fused(optim::Optimizer& opt, std::span<const Tensor> grads,
                  std::span<const Tensor> rounded_out = {});
  // Backs off on overflow, grows after growth_interval clean steps, resets per-step state.
  // With new_scale, sets the scale directly instead.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const;  // 1.0 when disabled (PyTorch returns 1.0 too)
  bool is_enabled() const { return options_.enabled; }
  double get_growth_factor() const { return options_.growth_factor; }
  double get_backoff_factor() const { return options_.backoff_factor; }
  int64_t get_growth_interval() const { return options_.growth_interval; }
  void set_growth_factor(double v);
  void set_backoff_factor(double v);
  void set_growth_interval(int64_t v);
  const GradScalerOptions& options() const { return options_; }

  // PyTorch's five keys: scale, growth_factor, backoff_factor, growth_interval,
  // _growth_tracker; plus ours: _hysteresis_tracker, applied_steps, skipped_steps.
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

  // Counters across the run (LR schedules and logs use them).
  int64_t applied_steps() const { return applied_steps_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  // Whether the last update() saw an overflow, and which parameters had it.
  bool last_step_skipped() const { return last_skipped_; }
  const std::vector<NonFiniteGrad>& last_nonfinite() const { return last_nonfinite_; }
  // Names for the non-finite report (e.g. model.named_parameters()).
  void name_parameters(const std::vector<std::pair<std::string, Tensor>>& named);
  // Data-parallel training: the found-inf flag of each step goes through `combine` (a MAX
  // over all ranks) before the skip decision, so every rank skips the same steps and keeps the
  // same scale, as PyTorch's GradScaler does with its found_inf all-reduce under DDP. It may
  // throw Error (a rank stopped responding).
  void set_found_inf_combiner(std::function<bool(bool)> combine) { combine_ = std::move(combine); }

 private:
  enum class Stage : uint8_t { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    bool found_inf = false;
  };
  std::string param_name(const Tensor& p, size_t index) const;

  GradScalerOptions options_;
  float scale_;  // f32, as PyTorch's _scale tensor; growth/backoff: float(double(scale_) * factor)
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_tracker_;
  int64_t applied_steps_ = 0, skipped_steps_ = 0;
  bool last_skipped_ = false;
  std::vector<NonFiniteGrad> last_nonfinite_, pending_nonfinite_;
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
  std::unordered_map<const void*, std::string> names_;
  std::function<bool(bool)> combine_;
};

}  // namespace mixprec::amp
