// module_test.cpp: the Module base (issue 13: no unit test): parameters and buffers named
// depth-first in registration order (PyTorch's named_parameters() order, which checkpoints
// and --init-from rely on), train/eval propagation, zero_grad, to(dtype) with and without
// keeping normalisation in f32, and the per-module autocast override.
#include <gtest/gtest.h>

#include "mixprec/amp/amp.h"
#include "mixprec/nn/nn.h"

namespace mixprec {
namespace {

// Records whether autocast was on when its forward ran.
class Probe : public nn::Module {
 public:
  Probe() {
    w = register_parameter("w", Tensor::ones({2}));
    register_buffer("count", Tensor::zeros({1}));
  }
  Tensor forward(const Tensor& x) override {
    saw_autocast = amp::is_autocast_enabled();
    return x;
  }
  const char* type_name() const override { return "Probe"; }
  Tensor w;
  bool saw_autocast = false;
};

class Norm : public nn::Module {
 public:
  Norm() { register_parameter("gamma", Tensor::ones({2})); }
  Tensor forward(const Tensor& x) override { return x; }
  const char* type_name() const override { return "Norm"; }
  bool is_normalization() const override { return true; }
};

class Net : public nn::Module {
 public:
  Net() {
    register_parameter("scale", Tensor::ones({1}));
    first = register_module("first", std::make_shared<Probe>());
    inner = register_module("inner", std::make_shared<Net2>());
    register_parameter("bias", Tensor::zeros({1}));
  }
  class Net2 : public nn::Module {
   public:
    Net2() {
      fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
      norm = register_module("norm", std::make_shared<Norm>());
    }
    Tensor forward(const Tensor& x) override { return x; }
    const char* type_name() const override { return "Net2"; }
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<Norm> norm;
  };
  Tensor forward(const Tensor& x) override { return (*first)(x); }
  const char* type_name() const override { return "Net"; }
  std::shared_ptr<Probe> first;
  std::shared_ptr<Net2> inner;
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

TEST(Module, ParametersAreNamedDepthFirstInRegistrationOrder) {
  Net net;
  // Own parameters first, then each child's, as PyTorch's named_parameters() lists them.
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"scale", "bias", "first.w", "inner.fc.weight", "inner.fc.bias", "inner.norm.gamma"}));
  EXPECT_EQ(net.num_parameters(), 1 + 1 + 2 + 6 + 2 + 2);
  EXPECT_EQ(names(net.named_buffers()), (std::vector<std::string>{"first.count"}));
  EXPECT_EQ(net.named_parameters()[2].second.same(net.first->w), true);  // the tensor itself, not a copy
}

TEST(Module, TrainAndEvalReachEveryDescendant) {
  Net net;
  EXPECT_TRUE(net.inner->fc->is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.first->is_training());
  EXPECT_FALSE(net.inner->norm->is_training());
  net.train();
  EXPECT_TRUE(net.inner->fc->is_training());
}

TEST(Module, ZeroGradLeavesGradientsUndefined) {
  Net net;
  for (Tensor p : net.parameters()) p.set_grad(Tensor::ones(p.shape()));
  net.zero_grad();
  for (const auto& [n, p] : net.named_parameters()) EXPECT_FALSE(p.grad().defined()) << n;
}

TEST(Module, ToDtypeConvertsParametersAndCanKeepNormalisationInF32) {
  Net a;
  a.to(DType::bf16);
  for (const auto& [n, p] : a.named_parameters()) EXPECT_EQ(p.dtype(), DType::bf16) << n;
  EXPECT_EQ(a.named_buffers()[0].second.dtype(), DType::f32);  // buffers stay as they are
  Net b;
  b.to(DType::f16, /*keep_normalization_fp32=*/true);
  for (const auto& [n, p] : b.named_parameters())
    EXPECT_EQ(p.dtype(), n == "inner.norm.gamma" ? DType::f32 : DType::f16) << n;
  EXPECT_TRUE(b.inner->fc->named_parameters()[0].second.requires_grad());
}

TEST(Module, AutocastOverrideAppliesToTheModuleOnly) {
  Net net;
  const Tensor x = Tensor::ones({1, 2});
  {
    amp::AutocastGuard on(DType::bf16);
    net(x);
    EXPECT_TRUE(net.first->saw_autocast);  // inherits the caller's state
    net.first->set_autocast(false);
    net(x);
    EXPECT_FALSE(net.first->saw_autocast);
    EXPECT_TRUE(amp::is_autocast_enabled());  // restored after the module
  }
  net.first->set_autocast(true);
  net(x);
  EXPECT_TRUE(net.first->saw_autocast);
  EXPECT_FALSE(amp::is_autocast_enabled());
}

// A model file's `precision: fp32` layer under O2 (16-bit weights, no autocast): it keeps f32
// weights, computes in f32 and hands its output on in the model's dtype, so that the next
// layer and the loss work (a linear dtype mismatch crashed o2-bf16 training before).
TEST(Module, AnFp32ModuleInsideAnO2ModelKeepsF32WeightsAndHandsBack16Bit) {
  nn::Sequential net;
  auto head = std::make_shared<nn::Linear>(4, 3);
  auto first = std::make_shared<nn::Linear>(2, 4);
  net.add(first);
  net.add(head);
  head->set_autocast(false);
  net.to(DType::bf16, /*keep_normalization_fp32=*/true);
  EXPECT_EQ(first->weight.dtype(), DType::bf16);
  EXPECT_EQ(head->weight.dtype(), DType::f32);
  EXPECT_EQ(head->bias.dtype(), DType::f32);
  const Tensor x = Tensor::from_vector({0.5f, -1.25f}, {1, 2}).to(DType::bf16);
  const Tensor y = net(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  // The head's value: f32 products of the bf16 hidden activations with f32 weights, rounded
  // to bf16 once at the end.
  const Tensor hidden = (*first)(x).to(DType::f32);
  const Tensor want = linear(hidden, head->weight, head->bias).to(DType::bf16);
  EXPECT_EQ(y.to_vector(), want.to_vector());
  {
    amp::AutocastGuard on(DType::bf16);  // under autocast the f32 output is left to the next op
    EXPECT_EQ(net(x.to(DType::f32)).dtype(), DType::f32);
  }
}

}  // namespace
}  // namespace mixprec
