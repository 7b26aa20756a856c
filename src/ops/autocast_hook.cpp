// autocast_hook.cpp: see autocast_hook.h.
#include "ops/autocast_hook.h"

#include <atomic>

namespace mixprec::ops_detail {

namespace {
std::atomic<const AutocastHooks*> g_hooks{nullptr};
}  // namespace

void install_autocast_hooks(const AutocastHooks* hooks) {
  g_hooks.store(hooks, std::memory_order_release);
}

void autocast_inputs(amp::OpId op, std::span<Tensor> inputs) {
  if (const AutocastHooks* h = g_hooks.load(std::memory_order_acquire)) h->cast(op, inputs);
}

std::vector<Tensor> autocast_inputs(amp::OpId op, std::initializer_list<Tensor> inputs) {
  std::vector<Tensor> out(inputs);
  autocast_inputs(op, std::span<Tensor>(out));
  return out;
}

Tensor autocast_input(amp::OpId op, const Tensor& input) {
  const AutocastHooks* h = g_hooks.load(std::memory_order_acquire);
  if (h == nullptr) return input;
  Tensor x = input;
  h->cast(op, std::span<Tensor>(&x, 1));
  return x;
}

AutocastOff::AutocastOff() {
  if (const AutocastHooks* h = g_hooks.load(std::memory_order_acquire))
    was_enabled_ = h->exchange_enabled(false);
}

AutocastOff::~AutocastOff() {
  if (const AutocastHooks* h = g_hooks.load(std::memory_order_acquire))
    h->exchange_enabled(was_enabled_);
}

}  // namespace mixprec::ops_detail
