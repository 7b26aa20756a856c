// autograd_engine_test.cpp: the backward engine's contract: accumulation across calls,
// shared subexpressions, graph freeing, grad mode, a leaf's first gradient taken over only
// when nothing else holds it, and its error messages.
#include <gtest/gtest.h>

#include <memory>

#include "autograd/node.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

Tensor leaf(std::vector<double> v, Shape s) {
  Tensor t = Tensor::from_vector_f64(v, s, DType::f64);
  t.requires_grad_(true);
  return t;
}

// out = x (values), with a backward that hands over `grad_for_x` (made by the test), as an
// op hands over the gradient it has just computed.
Tensor through(const Tensor& x, std::shared_ptr<Tensor> grad_for_x) {
  Tensor out = x.detach().contiguous();
  record_op(out, "through", {&x},
            [grad_for_x](const Tensor&) { return std::vector<Tensor>{std::move(*grad_for_x)}; });
  return out;
}

TEST(AutogradEngine, LeafTakesOverAGradientNothingElseHolds) {
  Tensor x = Tensor::from_vector({1.0f, 2.0f, 3.0f}, {3});
  x.requires_grad_(true);
  auto g = std::make_shared<Tensor>(Tensor::from_vector({0.5f, -1.0f, 4.0f}, {3}));
  const void* buffer = g->data();
  Tensor y = through(x, g);
  g.reset();  // the node's handle is now the only one
  y.backward(Tensor::ones({3}));
  EXPECT_EQ(x.grad().data(), buffer);  // no copy
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0.5f, -1.0f, 4.0f}));
}

TEST(AutogradEngine, LeafCopiesAGradientSomethingElseStillHolds) {
  // Held by the test (as a node's saved state or a second edge would hold it): the leaf gets
  // its own buffer, so a later in-place update of one does not change the other.
  for (bool view : {false, true}) {
    SCOPED_TRACE(view ? "a view shares the buffer" : "a second handle");
    Tensor x = Tensor::from_vector({1.0f, 2.0f}, {2});
    x.requires_grad_(true);
    auto g = std::make_shared<Tensor>(Tensor::from_vector({3.0f, 5.0f}, {2}));
    const Tensor other = view ? g->as_strided({2}, {1}, 0) : *g;
    if (view) *g = g->as_strided({2}, {1}, 0);  // the node's handle: another impl, same buffer
    Tensor y = through(x, g);
    g.reset();
    y.backward(Tensor::ones({2}));
    EXPECT_NE(x.grad().data(), other.data());
    x.mutable_grad().fill_(0.0);
    EXPECT_EQ(other.to_vector(), (std::vector<float>{3.0f, 5.0f}));
  }
}

TEST(AutogradEngine, ScalarBackwardOfProduct) {
  Tensor a = leaf({2.0, 3.0}, {2}), b = leaf({5.0, 7.0}, {2});
  sum(mul(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector_f64(), (std::vector<double>{5.0, 7.0}));
  EXPECT_EQ(b.grad().to_vector_f64(), (std::vector<double>{2.0, 3.0}));
}

TEST(AutogradEngine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor a = leaf({1.0, -2.0}, {2});
  sum(mul(a, 3.0)).backward();
  sum(mul(a, 3.0)).backward();
  EXPECT_EQ(a.grad().to_vector_f64(), (std::vector<double>{6.0, 6.0}));
}

TEST(AutogradEngine, SharedInputSumsBothPaths) {
  // y = a*a + a -> dy/da = 2a + 1
  Tensor a = leaf({1.5, -0.5}, {2});
  sum(add(mul(a, a), a)).backward();
  EXPECT_EQ(a.grad().to_vector_f64(), (std::vector<double>{4.0, 0.0}));
}

TEST(AutogradEngine, ExplicitGradientForNonScalar) {
  Tensor a = leaf({1.0, 2.0, 3.0}, {3});
  Tensor y = mul(a, 2.0);
  y.backward(Tensor::from_vector_f64({1.0, 10.0, 100.0}, {3}));
  EXPECT_EQ(a.grad().to_vector_f64(), (std::vector<double>{2.0, 20.0, 200.0}));
}

TEST(AutogradEngine, NonScalarWithoutGradientNamesTheShape) {
  Tensor a = leaf({1.0, 2.0}, {2});
  Tensor y = mul(a, 2.0);
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos) << e.what();
  }
}

TEST(AutogradEngine, WrongGradientShapeIsAnError) {
  Tensor a = leaf({1.0, 2.0}, {2});
  EXPECT_THROW(mul(a, 2.0).backward(Tensor::ones({3}, DType::f64)), Error);
}

TEST(AutogradEngine, SecondBackwardThroughFreedGraphIsAnError) {
  Tensor a = leaf({1.0}, {1});
  Tensor y = sum(mul(a, a));
  y.backward();
  EXPECT_THROW(y.backward(), Error);
}

TEST(AutogradEngine, NoGradGuardRecordsNothing) {
  Tensor a = leaf({1.0}, {1});
  Tensor y;
  {
    NoGradGuard ng;
    y = mul(a, 2.0);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), Error);
  EXPECT_TRUE(grad_mode_enabled());
}

TEST(AutogradEngine, DetachCutsTheGraph) {
  Tensor a = leaf({3.0}, {1});
  Tensor y = add(mul(a, 2.0).detach(), mul(a, 5.0));
  sum(y).backward();
  EXPECT_EQ(a.grad().to_vector_f64(), (std::vector<double>{5.0}));
}

TEST(AutogradEngine, GradReachingLeafHasLeafDtype) {
  // f32 leaf used through an f64 computation: its gradient arrives in f32.
  Tensor a = Tensor::from_vector({1.0f, 2.0f}, {2}, DType::f32);
  a.requires_grad_(true);
  sum(mul(a.to(DType::f64), 4.0)).backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().dtype(), DType::f32);
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{4.0f, 4.0f}));
}

TEST(AutogradEngine, DeepChainDoesNotOverflowTheStack) {
  Tensor a = leaf({1.0}, {1});
  Tensor y = a;
  for (int i = 0; i < 20000; ++i) y = add(y, 1.0);
  sum(y).backward();
  EXPECT_EQ(a.grad().to_vector_f64(), (std::vector<double>{1.0}));
}

TEST(AutogradEngine, RequiresGradOnIntegerTensorIsAnError) {
  Tensor t = Tensor::from_vector_i64({1, 2}, {2});
  EXPECT_THROW(t.requires_grad_(true), Error);
}

TEST(AutogradEngine, LeafGradReadyHookReportsEachLeafOnceWhenComplete) {
  // y = sum(w * (w * x) + b): w is used twice (as a tied weight is), b once.
  Tensor w = leaf({2.0, 3.0}, {2}), b = leaf({1.0, 1.0}, {2}), x = leaf({5.0, 7.0}, {2});
  x.requires_grad_(false);
  std::vector<std::pair<const Tensor*, std::vector<double>>> seen;
  const Tensor* names[] = {&w, &b};
  Tensor y = sum(add(mul(w, mul(w, x)), b));
  {
    LeafGradReadyHook hook([&](const Tensor& t) {
      for (const Tensor* n : names)
        if (n->impl() == t.impl()) seen.push_back({n, t.grad().to_vector_f64()});
    });
    y.backward();
  }
  ASSERT_EQ(seen.size(), 2u);
  // Each is reported with its complete gradient: w's is 2 w x, summed over both uses.
  for (const auto& [who, g] : seen) {
    if (who == &w) EXPECT_EQ(g, (std::vector<double>{20.0, 42.0}));
    if (who == &b) EXPECT_EQ(g, (std::vector<double>{1.0, 1.0}));
  }
  EXPECT_NE(seen[0].first, seen[1].first);
  // b's gradient is complete first (its edge leaves the last op); w after its second use.
  EXPECT_EQ(seen[0].first, &b);
  // Outside the hook's scope nothing is reported.
  seen.clear();
  sum(mul(w, 1.0)).backward();
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace mixprec
