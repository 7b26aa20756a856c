// gradient_underflow.cpp: see gradient_underflow.h. One read pass per gradient
// (count_f16_range), run only at the steps --underflow-every picks.
#include "train/gradient_underflow.h"

#include <algorithm>

#include "mixprec/core/f16_range.h"

namespace mixprec::train {

GradientUnderflow count_gradient_underflow(const std::vector<std::pair<std::string, Tensor>>& named_grads) {
  GradientUnderflow u;
  std::vector<GradientUnderflow::PerTensor> hit;
  for (const auto& [name, g] : named_grads) {
    if (!g.defined()) continue;
    const F16RangeCounts c = count_f16_range(g);
    u.values += c.values;
    u.subnormal += c.subnormal;
    u.flushed += c.flushed;
    if (c.subnormal + c.flushed > 0) hit.push_back({name, c.values, c.subnormal, c.flushed});
  }
  u.tensors = int64_t(hit.size());
  std::stable_sort(hit.begin(), hit.end(), [](const auto& a, const auto& b) {
    return a.subnormal + a.flushed > b.subnormal + b.flushed;
  });
  if (hit.size() > GradientUnderflow::kMaxNames) hit.resize(GradientUnderflow::kMaxNames);
  u.worst = std::move(hit);
  return u;
}

}  // namespace mixprec::train
