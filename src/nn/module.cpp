// module.cpp: parameter registration, hierarchical names, train/eval and dtype moves.
#include <sstream>

#include "core/tensor_impl.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/nn.h"
#include "mixprec/ops/ops_fused.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

Tensor Module::operator()(const Tensor& input) {
  if (!autocast_override_) return forward(input);  // the common case, without the std::function
  return with_precision(input, [this](const Tensor& x) { return forward(x); });
}

Tensor Module::with_precision(const Tensor& input, const std::function<Tensor(const Tensor&)>& body) {
  if (!autocast_override_) return body(input);
  if (!*autocast_override_) {
    // Without autocast (the O2 and O3 presets, 16-bit weights and activations) the output
    // goes back to the input's dtype, which is what the next layer's weights are in; under
    // autocast it stays f32 and the next op casts it as its policy says.
    const bool hand_back = !amp::is_autocast_enabled() && is_half(input.dtype());
    amp::AutocastGuard off(false);
    const bool cast = is_floating(input.dtype()) && input.dtype() != DType::f64;
    const Tensor out = body(cast ? input.to(DType::f32) : input);
    return hand_back && is_floating(out.dtype()) ? out.to(input.dtype()) : out;
  }
  amp::AutocastGuard on(amp::autocast_dtype(), true);
  return body(input);
}

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
  if (value.defined()) {
    value.storage()->recharge(MemoryCategory::parameters);
    value.requires_grad_(true);
  }
  params_.emplace_back(name, value);
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  if (value.defined()) value.storage()->recharge(MemoryCategory::parameters);
  buffers_.emplace_back(name, value);
  return buffers_.back().second;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : buffers_)
    if (t.defined()) out.emplace_back(name, t);
  for (const auto& [name, child] : children_)
    for (auto& [sub, t] : child->named_buffers()) out.emplace_back(name + "." + sub, t);
  return out;
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params_)
    if (t.defined()) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child);
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(name + "." + sub, m);
  }
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) t.set_grad(Tensor());
}

void Module::to(DType dtype, bool keep_normalization_fp32) {
  if (!is_floating(dtype))
    throw Error(Status::invalid_argument(std::string("Module::to: parameters must stay floating, got ") +
                                         dtype_name(dtype)));
  NoGradGuard ng;
  MemoryCategoryGuard mg(MemoryCategory::parameters);
  if (keep_normalization_fp32 && is_normalization()) return;
  // A module with autocast off (a model file's `precision: fp32`) is f32 under every
  // preset: its weights stay f32 too (operator() casts its input up and its output back).
  if (autocast_override_ == std::optional<bool>(false)) return;
  for (auto& [name, child] : children_) child->to(dtype, keep_normalization_fp32);
  for (auto& [name, t] : params_) {
    if (!t.defined()) continue;
    if (t.dtype() == dtype) continue;
    // Swap the buffer inside the shared impl, so every handle (optimizers, layers' fields)
    // sees the converted parameter.
    Tensor converted = t.detach().to(dtype);
    auto& im = TensorImpl::of(t);
    im.storage = converted.storage();
    im.strides = converted.strides();
    im.offset = converted.storage_offset();
    im.dtype = dtype;
    im.grad = Tensor();
    im.storage->bump_version();
  }
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) add(m);
}

Sequential& Sequential::add(std::shared_ptr<Module> module) {
  register_module(std::to_string(children().size()), std::move(module));
  return *this;
}

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> module) {
  register_module(name, std::move(module));
  return *this;
}

Residual::Residual(std::shared_ptr<Sequential> b, std::shared_ptr<Sequential> s)
    : body(register_module("body", std::move(b))) {
  if (s) shortcut = register_module("shortcut", std::move(s));
}

Tensor Residual::forward(const Tensor& input) {
  return add(shortcut ? (*shortcut)(input) : input, (*body)(input));
}

Tensor Sequential::forward(const Tensor& input) {
  const auto& kids = children();
  // A child that may be fused: the type asked for, and no autocast setting of its own.
  auto as = [&kids]<typename M>(size_t i, M*) -> M* {
    if (i >= kids.size() || kids[i].second->autocast_override()) return nullptr;
    return dynamic_cast<M*>(kids[i].second.get());
  };
  auto plain_pool = [](const MaxPool2d* p) { return p && p->stride() == p->kernel() && p->padding() == 0; };
  Tensor x = input;
  for (size_t i = 0; i < kids.size();) {
    const auto* conv = as(i, static_cast<Conv2d*>(nullptr));
    const MaxPool2d* pool = as(i + 2, static_cast<MaxPool2d*>(nullptr));
    // conv2d_relu_max_pool2d takes stride and padding only: a dilated or grouped convolution
    // runs as itself (before 2026-11-28 a dilated one was fused as undilated: wrong values).
    if (conv && conv->dilation == 1 && conv->groups == 1 && as(i + 1, static_cast<ReLU*>(nullptr)) &&
        plain_pool(pool)) {
      x = conv2d_relu_max_pool2d(x, conv->weight, conv->bias, conv->stride, conv->padding, pool->kernel());
      i += 3;
      continue;
    }
    pool = as(i + 1, static_cast<MaxPool2d*>(nullptr));
    if (as(i, static_cast<ReLU*>(nullptr)) && plain_pool(pool)) {
      x = relu_max_pool2d(x, pool->kernel());
      i += 2;
      continue;
    }
    x = (*kids[i].second)(x);
    ++i;
  }
  return x;
}

std::string summary(const Module& module) {
  std::ostringstream os;
  os << module.type_name() << " (" << module.num_parameters() << " parameters)\n";
  for (auto& [name, t] : module.named_parameters())
    os << "  " << name << " " << shape_str(t.shape()) << " " << dtype_name(t.dtype()) << "\n";
  return os.str();
}

}  // namespace mixprec::nn
