// grad_scaler_test.cpp: every transition of the scaler's state machine, PyTorch's own
// sequence, the errors of misuse, and scaled training against an unscaled control run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mixprec/autograd/autograd.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/nn/nn.h"
#include "mixprec/ops/ops.h"
#include "mixprec/optim/optim.h"
#include "mixprec/core/status.h"

namespace mixprec::amp {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One parameter whose gradient we set by hand: clean steps get finite values.
struct Rig {
  Tensor p = Tensor::from_vector({1.0f, 2.0f, 3.0f}, {3}).requires_grad_(true);
  optim::SGD opt{{p}, {.lr = 0.1}};
  void set_grad(std::vector<float> g) { p.set_grad(Tensor::from_vector(g, {3})); }
  void clean_step(GradScaler& s) {
    set_grad({1.0f, 1.0f, 1.0f});
    s.step(opt);
    s.update();
  }
  void inf_step(GradScaler& s) {
    set_grad({1.0f, kInf, 1.0f});
    s.step(opt);
    s.update();
  }
};

TEST(GradScaler, DefaultsMatchPyTorch) {
  GradScaler s;
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.get_growth_factor(), 2.0);
  EXPECT_EQ(s.get_backoff_factor(), 0.5);
  EXPECT_EQ(s.get_growth_interval(), 2000);
  EXPECT_TRUE(s.is_enabled());
}

TEST(GradScaler, MatchesPyTorchScaleSequence) {
  // test_grad_scaling_update_scale: growth 2, backoff 0.25, interval 2: 4 -> 4 -> 8 -> 2.
  GradScaler s({.init_scale = 4, .growth_factor = 2, .backoff_factor = 0.25, .growth_interval = 2});
  Rig r;
  r.clean_step(s);
  EXPECT_EQ(s.get_scale(), 4.0);
  r.clean_step(s);
  EXPECT_EQ(s.get_scale(), 8.0);
  r.inf_step(s);
  EXPECT_EQ(s.get_scale(), 2.0);
}

TEST(GradScaler, GrowsOnlyAfterGrowthIntervalCleanSteps) {
  GradScaler s({.init_scale = 8, .growth_interval = 3});
  Rig r;
  r.clean_step(s);
  r.clean_step(s);
  EXPECT_EQ(s.get_scale(), 8.0);
  r.clean_step(s);
  EXPECT_EQ(s.get_scale(), 16.0);
  EXPECT_EQ(s.state_dict().at("_growth_tracker"), 0.0);
}

TEST(GradScaler, InfHalvesScaleResetsCounterAndSkipsStep) {
  GradScaler s({.init_scale = 1024, .growth_interval = 3});
  Rig r;
  r.clean_step(s);
  r.clean_step(s);
  EXPECT_EQ(s.state_dict().at("_growth_tracker"), 2.0);
  const std::vector<float> before = r.p.to_vector();
  r.set_grad({1.0f, kInf, 1.0f});
  EXPECT_FALSE(s.step(r.opt));
  s.update();
  EXPECT_EQ(r.p.to_vector(), before);  // untouched
  EXPECT_EQ(s.get_scale(), 512.0);
  EXPECT_EQ(s.state_dict().at("_growth_tracker"), 0.0);
  EXPECT_TRUE(s.last_step_skipped());
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.applied_steps(), 2);
}

// Data-parallel training: another rank's overflow (the combiner says so) skips this rank's
// step too, with finite local gradients, in the fused and the unfused step; the combiner
// sees this rank's own flag.
TEST(GradScaler, FoundInfCombinerSkipsACleanLocalStep) {
  for (bool fused : {false, true}) {
    GradScaler s({.init_scale = 1024, .growth_interval = 3});
    Rig r;
    std::vector<bool> seen;
    s.set_found_inf_combiner([&](bool local) {
      seen.push_back(local);
      return true;  // some other rank overflowed
    });
    r.set_grad({1.0f, 1.0f, 1.0f});
    const std::vector<float> before = r.p.to_vector();
    const Tensor g = r.p.grad();
    const bool stepped = fused ? s.step_fused(r.opt, std::span<const Tensor>(&g, 1)) : s.step(r.opt);
    s.update();
    EXPECT_FALSE(stepped) << (fused ? "fused" : "unfused");
    EXPECT_EQ(seen, std::vector<bool>{false});
    EXPECT_EQ(r.p.to_vector(), before);
    EXPECT_EQ(s.get_scale(), 512.0);
    EXPECT_EQ(s.skipped_steps(), 1);
  }
}

TEST(GradScaler, NanInOneParamOfManySkipsWholeStepAndIsNamed) {
  Tensor a = Tensor::from_vector({1.0f, 2.0f}, {2}).requires_grad_(true);
  Tensor b = Tensor::from_vector({3.0f, 4.0f, 5.0f}, {3}).requires_grad_(true);
  optim::Adam opt({a, b});
  GradScaler s;
  s.name_parameters({{"layer.weight", a}, {"layer.bias", b}});
  a.set_grad(Tensor::from_vector({1.0f, 1.0f}, {2}));
  b.set_grad(Tensor::from_vector({1.0f, 1.0f, std::nanf("")}, {3}));
  const auto a0 = a.to_vector(), b0 = b.to_vector();
  EXPECT_FALSE(s.step(opt));
  s.update();
  EXPECT_EQ(a.to_vector(), a0);
  EXPECT_EQ(b.to_vector(), b0);
  EXPECT_TRUE(opt.state_tensors().empty());  // Adam never ran: no moments created
  ASSERT_EQ(s.last_nonfinite().size(), 1u);
  EXPECT_EQ(s.last_nonfinite()[0].name, "layer.bias");
  EXPECT_EQ(s.last_nonfinite()[0].count, 1);
  EXPECT_EQ(s.last_nonfinite()[0].first_index, 2);
}

TEST(GradScaler, InfInOneElementIsFound) {
  // Guards against a build that lets the compiler assume finite math in the check.
  for (int64_t n : {1, 17, 1000, 300001}) {
    Tensor p = Tensor::zeros({n}).requires_grad_(true);
    optim::SGD opt({p}, {.lr = 1.0});
    GradScaler s;
    Tensor g = Tensor::ones({n});
    g.data_ptr<float>()[n - 1] = -kInf;
    p.set_grad(g);
    EXPECT_FALSE(s.step(opt)) << n;
    s.update();
    ASSERT_EQ(s.last_nonfinite().size(), 1u);
    EXPECT_EQ(s.last_nonfinite()[0].first_index, n - 1);
  }
}

TEST(GradScaler, SecondUnscaleIsAnError) {
  GradScaler s;
  Rig r;
  r.set_grad({1, 1, 1});
  s.unscale(r.opt);
  EXPECT_THROW(s.unscale(r.opt), Error);
}

TEST(GradScaler, UnscaleAfterStepAndDoubleStepAreErrors) {
  GradScaler s;
  Rig r;
  r.set_grad({1, 1, 1});
  s.step(r.opt);
  EXPECT_THROW(s.unscale(r.opt), Error);
  EXPECT_THROW(s.step(r.opt), Error);
  s.update();
  r.set_grad({1, 1, 1});
  EXPECT_NO_THROW(s.step(r.opt));  // a new step after update() is fine
}

TEST(GradScaler, UpdateWithoutInfCheckIsAnError) {
  GradScaler s;
  EXPECT_THROW(s.update(), Error);
}

TEST(GradScaler, UnscaleDividesByTheScale) {
  GradScaler s({.init_scale = 8});
  Rig r;
  r.set_grad({8, 16, -24});
  s.unscale(r.opt);
  EXPECT_EQ(r.p.grad().to_vector(), (std::vector<float>{1, 2, -3}));
}

TEST(GradScaler, ScaleMultipliesInF32) {
  GradScaler s;
  Tensor loss = Tensor::scalar(2.0, DType::f16);
  Tensor scaled = s.scale(loss);
  EXPECT_EQ(scaled.dtype(), DType::f32);     // f16 would overflow: 2 * 65536 > 65504
  EXPECT_EQ(scaled.item(), 131072.0);
}

TEST(GradScaler, DisabledIsAPassThrough) {
  GradScaler s({.enabled = false});
  Rig r;
  Tensor loss = Tensor::scalar(3.0);
  EXPECT_TRUE(s.scale(loss).same(loss));
  r.set_grad({1, kInf, 1});
  EXPECT_TRUE(s.step(r.opt));  // no checking when disabled
  s.update();
  EXPECT_EQ(s.get_scale(), 1.0);
  EXPECT_TRUE(s.state_dict().empty());
}

TEST(GradScaler, ExplicitNewScale) {
  GradScaler s;
  Rig r;
  r.clean_step(s);
  r.set_grad({1, 1, 1});
  s.step(r.opt);
  s.update(128.0);
  EXPECT_EQ(s.get_scale(), 128.0);
}

TEST(GradScaler, MinAndMaxScaleBoundTheScale) {
  GradScaler s({.init_scale = 4, .growth_interval = 1, .min_scale = 2.0, .max_scale = 8.0});
  Rig r;
  r.clean_step(s);
  r.clean_step(s);
  r.clean_step(s);
  EXPECT_EQ(s.get_scale(), 8.0);
  r.inf_step(s);
  r.inf_step(s);
  r.inf_step(s);
  EXPECT_EQ(s.get_scale(), 2.0);
}

TEST(GradScaler, HysteresisToleratesOverflowsBeforeBackingOff) {
  // Megatron's meaning: with hysteresis 2, the second consecutive overflow backs off.
  GradScaler s({.init_scale = 64, .growth_interval = 100, .hysteresis = 2});
  Rig r;
  r.inf_step(s);
  EXPECT_EQ(s.get_scale(), 64.0);
  EXPECT_EQ(s.skipped_steps(), 1);  // still skipped
  r.inf_step(s);
  EXPECT_EQ(s.get_scale(), 32.0);
}

TEST(GradScaler, NeverGrowsIntoInfinity) {
  GradScaler s({.init_scale = 3e38, .growth_interval = 1});
  Rig r;
  r.clean_step(s);
  EXPECT_FLOAT_EQ(float(s.get_scale()), 3e38f);
}

TEST(GradScaler, StateDictRoundTripMidIntervalContinuesIdentically) {
  GradScalerOptions o{.init_scale = 16, .growth_interval = 3};
  GradScaler a(o);
  Rig ra;
  ra.clean_step(a);
  ra.clean_step(a);  // growth tracker at 2 of 3
  const auto state = a.state_dict();
  for (const char* k : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    EXPECT_TRUE(state.count(k)) << k;
  GradScaler b(GradScalerOptions{.init_scale = 1});
  b.load_state_dict(state);
  Rig rb;
  ra.clean_step(a);
  rb.clean_step(b);
  EXPECT_EQ(a.get_scale(), 32.0);
  EXPECT_EQ(b.get_scale(), 32.0);
  ra.inf_step(a);
  rb.inf_step(b);
  EXPECT_EQ(a.state_dict(), b.state_dict());
}

TEST(GradScaler, LoadStateDictRejectsMissingKeys) {
  GradScaler s;
  EXPECT_THROW(s.load_state_dict({{"scale", 2.0}}), Error);
  EXPECT_THROW(s.load_state_dict({}), Error);
}

TEST(GradScaler, BadOptionsAreRejected) {
  EXPECT_THROW(GradScaler({.growth_factor = 0.5}), Error);
  EXPECT_THROW(GradScaler({.backoff_factor = 1.5}), Error);
  EXPECT_THROW(GradScaler({.growth_interval = 0}), Error);
  EXPECT_THROW(GradScaler({.init_scale = -1}), Error);
}

TEST(GradScaler, ClipSeesUnscaledGradients) {
  GradScaler s({.init_scale = 1024});
  Rig r;
  r.set_grad({3.0f * 1024, 4.0f * 1024, 0.0f});  // unscaled norm 5
  s.unscale(r.opt);
  const double norm = optim::clip_grad_norm_(r.opt.params(), 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-6);
  const auto g = r.p.grad().to_vector();
  EXPECT_NEAR(std::sqrt(g[0] * g[0] + g[1] * g[1]), 1.0, 1e-5);
  EXPECT_TRUE(s.step(r.opt));  // step after an explicit unscale does not unscale again
  s.update();
  EXPECT_NEAR(r.p.to_vector()[0], 1.0f - 0.1f * 0.6f, 1e-5);
}

TEST(GradScaler, SeveralOptimizersShareOneScaler) {
  Tensor a = Tensor::from_vector({1.0f}, {1}).requires_grad_(true);
  Tensor b = Tensor::from_vector({1.0f}, {1}).requires_grad_(true);
  optim::SGD oa({a}, {.lr = 1.0}), ob({b}, {.lr = 1.0});
  GradScaler s({.init_scale = 4});
  a.set_grad(Tensor::from_vector({4.0f}, {1}));
  b.set_grad(Tensor::from_vector({kInf}, {1}));
  EXPECT_TRUE(s.step(oa));   // a's grads are finite: a steps
  EXPECT_FALSE(s.step(ob));  // b's are not: b skips
  s.update();                // any overflow backs off the shared scale
  EXPECT_EQ(s.get_scale(), 2.0);
  EXPECT_EQ(a.to_vector()[0], 0.0f);
  EXPECT_EQ(b.to_vector()[0], 1.0f);
}

TEST(GradScaler, GradientAccumulationOverMicroBatches) {
  // Two scaled micro-batches accumulate; one unscale gives the sum of true gradients.
  Tensor w = Tensor::from_vector({0.5f, -0.5f}, {2}).requires_grad_(true);
  optim::SGD opt({w}, {.lr = 1.0});
  GradScaler s({.init_scale = 256});
  const Tensor x1 = Tensor::from_vector({1.0f, 2.0f}, {2}), x2 = Tensor::from_vector({3.0f, 4.0f}, {2});
  s.scale(sum(mul(w, x1))).backward();
  s.scale(sum(mul(w, x2))).backward();
  s.unscale(opt);
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{4.0f, 6.0f}));
}

TEST(GradScaler, ScaledTrainingWithInjectedInfMatchesControlRun) {
  // Scaled run: linear regression, SGD, inf injected at step 3 of 8. Control run: f32,
  // no scaler, step 3 skipped by hand. Parameters agree within 1e-3 (PyTorch's harness).
  manual_seed(3);
  const Tensor x = Tensor::normal({16, 4}, 0, 1), y = Tensor::normal({16, 2}, 0, 1);
  auto make = [] {
    manual_seed(5);
    return std::make_shared<nn::Linear>(4, 2);
  };
  auto scaled = make(), control = make();
  optim::SGD opt_s(scaled->parameters(), {.lr = 0.05}), opt_c(control->parameters(), {.lr = 0.05});
  GradScalerOptions o{.init_scale = 128, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 2};
  GradScaler s(o);
  const int kSteps = 8, kInfAt = 3;
  int grown = 0, skipped = 0, tracker = 0;
  for (int step = 1; step <= kSteps; ++step) {
    opt_s.zero_grad();
    s.scale(mse_loss((*scaled)(x), y)).backward();
    if (step == kInfAt) scaled->weight.grad().data_ptr<float>()[0] = kInf;
    s.step(opt_s);
    s.update();
    if (step == kInfAt) { ++skipped; tracker = 0; }
    else if (++tracker == 2) { ++grown; tracker = 0; }
    if (step == kInfAt) continue;
    opt_c.zero_grad();
    mse_loss((*control)(x), y).backward();
    opt_c.step();
  }
  const auto ps = scaled->parameters(), pc = control->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto a = ps[i].to_vector(), b = pc[i].to_vector();
    for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-3);
  }
  EXPECT_EQ(s.get_scale(), 128.0 * std::pow(2.0, grown) * std::pow(0.5, skipped));
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.applied_steps(), kSteps - 1);
}

TEST(GradScaler, F16GradientsFlushWithoutScalingAndSurviveWithIt) {
  // dL/dw = a * 1e-4 = 1e-8 per element, computed in f16: below f16's smallest subnormal
  // (2^-24 ~ 6e-8), so it flushes to 0. The loss itself is summed in f32, as autocast does.
  const Tensor a = Tensor::full({4}, 1e-4, DType::f16);
  auto loss_of = [&](const Tensor& w16) { return sum(mul(mul(w16, a), 1e-4).to(DType::f32)); };
  Tensor w16 = Tensor::full({4}, 1.0, DType::f16).requires_grad_(true);
  loss_of(w16).backward();
  EXPECT_EQ(w16.grad().dtype(), DType::f16);
  for (float v : w16.grad().to_vector()) EXPECT_EQ(v, 0.0f);  // flushed: the range problem

  // Scaled by 2^15 the f16 gradient is ~3.3e-4, a normal f16 number; divided by the scale
  // in f32 (where f32 master weights unscale it) it is 1e-8 again (within f16's 2^-11
  // relative rounding of the factors: 1% is generous).
  Tensor w16b = Tensor::full({4}, 1.0, DType::f16).requires_grad_(true);
  GradScaler s({.init_scale = 32768, .allow_fp16_grads = true});
  s.scale(loss_of(w16b)).backward();
  for (float v : w16b.grad().to_vector()) EXPECT_NEAR(v / 32768.0f, 1e-8f, 1e-10f);

  // 2^16 (the default init scale) overflows: d(scale * sum)/dx = 65536 > 65504 in f16.
  // That is why the scale starts high and backs off in the first steps.
  Tensor w16c = Tensor::full({4}, 1.0, DType::f16).requires_grad_(true);
  GradScaler big({.allow_fp16_grads = true});
  big.scale(loss_of(w16c)).backward();
  optim::SGD opt_c({w16c}, {.lr = 1.0});
  EXPECT_FALSE(big.step(opt_c));
  big.update();
  EXPECT_EQ(big.get_scale(), 32768.0);
}

}  // namespace
}  // namespace mixprec::amp
