// autocast_hook.h: the one question ops ask about autocast: "what does my row of the policy
// table do to these inputs now?" Ops name their row (amp::OpId, mixprec/ops/op_category.h) and
// call autocast_inputs; the answer comes from src/amp (the layer above: the thread's
// autocast state, the policy table with its overrides, the weight-cast cache), which
// installs its hooks when the first AutocastGuard is made. Before that, autocast cannot be
// on, and the inputs stay as they are. So ops include no amp header, and amp may use ops
// (its casts are ops::cast): the ops <-> amp include loop is gone, and no op decides a
// cast itself.
#pragma once
#include <initializer_list>
#include <span>
#include <vector>

#include "mixprec/ops/op_category.h"
#include "mixprec/core/tensor.h"

namespace mixprec::ops_detail {

struct AutocastHooks {
  // Applies op's row to inputs in place (undefined tensors stay undefined); a no-op when
  // autocast is off on this thread.
  void (*cast)(amp::OpId op, std::span<Tensor> inputs);
  // Sets this thread's enabled flag, returns the previous one (dtype and cache unchanged).
  bool (*exchange_enabled)(bool enabled);
};

// Called by amp; the hooks must outlive the process (a static object).
void install_autocast_hooks(const AutocastHooks* hooks);

void autocast_inputs(amp::OpId op, std::span<Tensor> inputs);
std::vector<Tensor> autocast_inputs(amp::OpId op, std::initializer_list<Tensor> inputs);
Tensor autocast_input(amp::OpId op, const Tensor& input);

// For an op built from other ops, after it applied its own row: the ops inside run on the
// cast inputs as they would outside autocast (PyTorch excludes the autocast key below an
// autocast op the same way). Restores the flag when it goes out of scope.
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  bool was_enabled_ = false;
};

}  // namespace mixprec::ops_detail
