// fused_update_step_test.cpp: the fused mixed-precision step (GradScaler::step_fused,
// MasterWeights::fused_step_inputs, PrecisionStep's fused mode) against the unfused
// sequence it replaces (unscale pass, f32 master gradients, step, copy_to_model), run on the
// same data: weights, masters, optimizer state and scaler state must agree bit for bit after
// every step, a skipped step must change nothing, and 16-bit weights must stay their masters
// rounded (checked with half.h's scalar rounding).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "mixprec/amp/amp.h"
#include "mixprec/data/data.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/half.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/models.h"
#include "mixprec/optim/optim.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/status.h"
#include "train/precision_step.h"

namespace mixprec {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes raw_bytes(const Tensor& t) {  // a dense buffer in memory order
  Bytes b(size_t(t.numel()) * dtype_size(t.dtype()));
  std::memcpy(b.data(), t.data(), b.size());
  return b;
}

// Everything a step may change: the model's weights, the optimizer's parameters, its state.
std::vector<Bytes> snapshot(const std::vector<Tensor>& weights, const optim::Optimizer& opt) {
  std::vector<Bytes> s;
  for (const Tensor& w : weights) s.push_back(raw_bytes(w));
  for (const Tensor& p : opt.params()) s.push_back(raw_bytes(p));
  for (const auto& [name, t] : opt.state_tensors()) s.push_back(raw_bytes(t));
  return s;
}

// Counts 16-bit weights that are not exactly their f32 master rounded to nearest even.
int64_t weights_off_their_masters(const amp::MasterWeights& mw, const std::vector<Tensor>& weights) {
  int64_t off = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    if (w.dtype() == DType::f32) continue;
    const float* m = mw.masters()[i].data_ptr<float>();
    const uint16_t* b = static_cast<const uint16_t*>(w.data());
    for (int64_t j = 0; j < w.numel(); ++j)
      off += b[j] != (w.dtype() == DType::bf16 ? BFloat16(m[j]).bits : Half(m[j]).bits);
  }
  return off;
}

std::unique_ptr<optim::Optimizer> make_opt(const std::string& kind, std::vector<Tensor> params) {
  if (kind == "adam") return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-3});
  if (kind == "adamw") return std::make_unique<optim::AdamW>(std::move(params));
  return std::make_unique<optim::SGD>(std::move(params),
                                      optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
}

const Shape kShapes[] = {{70001}, {6, 3, 3, 3}, {5}};  // threaded; channels_last; tiny

// Weights of one dtype (f32: amp-style, the optimizer steps them; 16-bit: O2 with f32
// masters), an optimizer and a scaler. Two rigs built alike start bit-identical.
struct Rig {
  std::vector<std::pair<std::string, Tensor>> named;
  std::vector<Tensor> weights;
  std::optional<amp::MasterWeights> masters;
  std::unique_ptr<optim::Optimizer> opt;
  amp::GradScaler scaler;

  Rig(DType dtype, const std::string& kind, bool scaling)
      : scaler(amp::GradScalerOptions{.init_scale = 1024, .growth_interval = 2, .enabled = scaling}) {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (size_t i = 0; i < std::size(kShapes); ++i) {
      std::vector<float> v(size_t(shape_numel(kShapes[i])));
      for (float& x : v) x = d(rng);
      Tensor w = Tensor::from_vector(v, kShapes[i], dtype);
      if (w.dim() == 4) w = w.to_memory_format(MemoryFormat::channels_last);
      w.requires_grad_(true);
      named.emplace_back("w" + std::to_string(i), w);
      weights.push_back(w);
    }
    if (dtype != DType::f32) masters.emplace(named);
    opt = make_opt(kind, masters ? masters->masters() : weights);
    scaler.name_parameters(masters ? masters->named_masters() : named);
  }

  // The model's gradients of step `step` (scaled when the scaler is on); at inf_step an inf
  // at buffer index 5 of w1.
  void set_grads(int step, int inf_step) {
    if (masters) masters->zero_grad();  // a new step: no accumulated master gradients
    std::mt19937_64 rng(100 + uint64_t(step));
    std::normal_distribution<float> d(0.0f, scaler.is_enabled() ? 1024.0f : 1.0f);
    for (size_t i = 0; i < weights.size(); ++i) {
      std::vector<float> v(size_t(weights[i].numel()));
      for (float& x : v) x = d(rng);
      Tensor g = Tensor::from_vector(v, weights[i].shape(), weights[i].dtype());
      if (g.dim() == 4) g = g.to_memory_format(MemoryFormat::channels_last);
      if (step == inf_step && i == 1) {
        if (g.dtype() == DType::f32) g.data_ptr<float>()[5] = std::numeric_limits<float>::infinity();
        else g.data_ptr<uint16_t>()[5] = g.dtype() == DType::bf16 ? 0x7f80 : 0x7c00;
      }
      weights[i].set_grad(g);
    }
  }

  bool unfused_step() {
    if (masters) masters->accumulate_grads();
    const bool stepped = scaler.step(*opt);
    scaler.update();
    if (masters && stepped) masters->copy_to_model();
    return stepped;
  }

  bool fused_step() {
    std::vector<Tensor> grads(weights.size()), out(weights.size());
    if (masters) masters->fused_step_inputs(grads, out);
    else for (size_t i = 0; i < weights.size(); ++i) grads[i] = weights[i].grad();
    const bool stepped = scaler.step_fused(*opt, grads, out);
    scaler.update();
    return stepped;
  }
};

TEST(FusedUpdateStep, FusedEqualsUnfusedForEveryOptimizerGradDtypeAndScaling) {
  const int kSteps = 5, kInfStep = 3;
  for (const char* kind : {"adam", "adamw", "sgd"})
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      for (bool scaling : {false, true}) {
        SCOPED_TRACE(std::string(kind) + " grads " + dtype_name(dtype) + (scaling ? " scaled" : " unscaled"));
        Rig unfused(dtype, kind, scaling), fused(dtype, kind, scaling);
        ASSERT_EQ(snapshot(unfused.weights, *unfused.opt), snapshot(fused.weights, *fused.opt));
        for (int step = 1; step <= kSteps; ++step) {
          SCOPED_TRACE("step " + std::to_string(step));
          const int inf_step = scaling ? kInfStep : -1;  // without a scaler an inf is applied
          unfused.set_grads(step, inf_step);
          fused.set_grads(step, inf_step);
          const auto before = snapshot(fused.weights, *fused.opt);
          const bool a = unfused.unfused_step(), b = fused.fused_step();
          EXPECT_EQ(a, step != inf_step);
          EXPECT_EQ(b, a);
          EXPECT_EQ(snapshot(fused.weights, *fused.opt), snapshot(unfused.weights, *unfused.opt));
          EXPECT_EQ(fused.scaler.state_dict(), unfused.scaler.state_dict());
          if (fused.masters) EXPECT_EQ(weights_off_their_masters(*fused.masters, fused.weights), 0);
          if (step == inf_step) {
            EXPECT_EQ(snapshot(fused.weights, *fused.opt), before);  // nothing moved
            ASSERT_EQ(fused.scaler.last_nonfinite().size(), 1u);
            EXPECT_EQ(fused.scaler.last_nonfinite()[0].name, "w1");
            EXPECT_EQ(fused.scaler.last_nonfinite()[0].count, 1);
            EXPECT_EQ(fused.scaler.last_nonfinite()[0].first_index, 5);
          }
        }
      }
}

TEST(FusedUpdateStep, PrecisionStepFusedMatchesUnfusedWithAccumulationClippingAndInjection) {
  // A small Cnn (conv + linear, 8x8 inputs): every kind of parameter, quick in every preset.
  auto make_model = [] { return std::make_shared<nn::Cnn>(1, 8, 8, 10); };
  ImageDataset data = make_synthetic(48, 1, 8, 8, 10, 1);
  DataLoader loader(std::move(data), {.batch_size = 8, .shuffle = false, .prefetch = 0});
  std::vector<Batch> batches;
  for (int i = 0; i < 6; ++i) batches.push_back(*loader.next());
  struct Variant { const char* name; const char* optimizer; size_t micro; double clip; };
  const Variant variants[] = {{"plain", "adam", 1, 0.0}, {"accumulate", "adamw", 2, 0.0}, {"clip", "sgd", 1, 0.5}};
  for (const char* preset_name : {"fp32", "amp-bf16", "amp-fp16", "o2-bf16", "o2-fp16", "pure-bf16"})
    for (const Variant& var : variants) {
      SCOPED_TRACE(std::string(preset_name) + " " + var.name);
      const amp::Preset preset = amp::preset_by_name(preset_name).value();
      train::TrainConfig c;
      c.optimizer = var.optimizer;
      c.momentum = 0.9;
      c.clip_grad_norm = var.clip;
      c.init_scale = 256;
      manual_seed(0);
      train::PrecisionStep unfused(preset, make_model(), c);
      unfused.set_fused_update(false);
      manual_seed(0);
      train::PrecisionStep fused(preset, make_model(), c);
      fused.set_fused_update(true);
      const std::string inject;  // "": the first parameter with a gradient
      for (size_t step = 0; step < 3; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        std::vector<Batch> micro;
        for (size_t k = 0; k < var.micro; ++k) micro.push_back(batches[(step * var.micro + k) % batches.size()]);
        const std::string* inj = (preset.loss_scaling && step == 1) ? &inject : nullptr;
        const auto a = unfused.run(micro, inj), b = fused.run(micro, inj);
        EXPECT_EQ(b.stepped, a.stepped);
        EXPECT_EQ(b.loss, a.loss);
        EXPECT_EQ(b.scale_used, a.scale_used);
        if (inj) EXPECT_FALSE(b.stepped);
        EXPECT_EQ(snapshot(fused.model().parameters(), fused.optimizer()),
                  snapshot(unfused.model().parameters(), unfused.optimizer()));
        EXPECT_EQ(fused.scaler().state_dict(), unfused.scaler().state_dict());
        if (fused.masters()) EXPECT_EQ(weights_off_their_masters(*fused.masters(), fused.model().parameters()), 0);
      }
    }
}

TEST(FusedUpdateStep, AutocastForwardUsesTheCopiesTheUpdateWrote) {
  // amp-bf16 (no masters): after the first step the fused update writes each parameter's
  // bf16 copy and the next forward casts nothing (values: the fused-vs-unfused test above).
  train::TrainConfig c;
  manual_seed(0);
  train::PrecisionStep step(amp::preset_by_name("amp-bf16").value(),
                            std::make_shared<nn::Cnn>(1, 8, 8, 10), c);
  ImageDataset d = make_synthetic(16, 1, 8, 8, 10, 1);
  DataLoader loader(std::move(d), {.batch_size = 8, .shuffle = false, .prefetch = 0});
  std::vector<Batch> b1{*loader.next()}, b2{*loader.next()};
  const int64_t n = int64_t(step.model().parameters().size());
  amp::reset_cast_cache_stats();
  step.run(b1);
  EXPECT_EQ(amp::cast_cache_stats().casts, n);  // first step: nothing prepared yet
  amp::reset_cast_cache_stats();
  step.run(b2);
  EXPECT_EQ(amp::cast_cache_stats().casts, 0);
  EXPECT_EQ(amp::cast_cache_stats().prepared, n);
}

// (A steady fused step allocating nothing is Memory.SteadyStateTrainingStepMakesNoHeapAllocation:
// the fused update is PrecisionStep's default.)
TEST(FusedUpdateStep, O2ReadsThe16BitGradientsWithoutF32MasterCopies) {
  for (const char* preset : {"fp32", "amp-bf16", "o2-bf16"}) {
    SCOPED_TRACE(preset);
    train::TrainConfig c;
    manual_seed(0);
    train::PrecisionStep step(amp::preset_by_name(preset).value(), nn::make_model(nn::model_spec("cnn").value()), c);
    step.set_fused_update(true);
    ImageDataset d = make_synthetic(64, 1, 28, 28, 10, 1);
    DataLoader loader(std::move(d), {.batch_size = 32, .shuffle = false, .prefetch = 0});
    std::vector<Batch> b1{*loader.next()}, b2{*loader.next()};
    step.run(b1);
    step.run(b2);
    if (auto* mw = step.masters()) {
      // The 16-bit gradients were read in place: no f32 copy of them was made.
      const auto named = step.model().named_parameters();
      for (size_t i = 0; i < named.size(); ++i)
        if (named[i].second.dtype() != DType::f32) EXPECT_FALSE(mw->masters()[i].grad().defined()) << named[i].first;
    }
  }
}

TEST(FusedUpdateStep, BadArgumentsAreRejectedBeforeAnythingChanges) {
  Tensor p = Tensor::from_vector({1.0f, 2.0f}, {2}).requires_grad_(true);
  optim::Adam opt({p});
  const Tensor g = Tensor::from_vector({1.0f, 1.0f}, {2});
  const Tensor two[] = {g, g};
  EXPECT_THROW(opt.step_fused(two), Error);  // two gradients for one parameter
  const Tensor wrong_out = Tensor::zeros({2}, DType::f32);
  EXPECT_THROW(opt.step_fused({&g, 1}, 1.0f, {&wrong_out, 1}), Error);  // not 16-bit
  const Tensor short_grad = Tensor::from_vector({1.0f}, {1});
  EXPECT_THROW(opt.step_fused({&short_grad, 1}), Error);
  EXPECT_EQ(p.to_vector(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(opt.step_count(), 0);

  // A 16-bit parameter cannot take an unscaling factor (unscale() would round in 16 bits).
  Tensor h = Tensor::from_vector({1.0f, 2.0f}, {2}, DType::bf16).requires_grad_(true);
  optim::SGD sgd({h}, {.lr = 0.1});
  const Tensor hg = Tensor::from_vector({1.0f, 1.0f}, {2}, DType::bf16);
  EXPECT_THROW(sgd.step_fused({&hg, 1}, 0.5f), Error);
  amp::GradScaler scaler;
  EXPECT_THROW(scaler.step_fused(sgd, {&hg, 1}), Error);
  EXPECT_EQ(h.to_vector(), (std::vector<float>{1.0f, 2.0f}));

  // O2: a newer 16-bit gradient next to an accumulated f32 one means accumulate_grads was skipped.
  Tensor w = Tensor::from_vector({1.0f}, {1}, DType::bf16).requires_grad_(true);
  amp::MasterWeights mw({{"w", w}});
  w.set_grad(Tensor::from_vector({1.0f}, {1}, DType::bf16));
  mw.accumulate_grads();
  w.set_grad(Tensor::from_vector({2.0f}, {1}, DType::bf16));
  std::vector<Tensor> grads(1), out(1);
  EXPECT_THROW(mw.fused_step_inputs(grads, out), Error);
}

// An optimizer outside the library that only implements update(): the default fused path
// must give the same numbers in two passes.
class PlainSgd : public optim::Optimizer {
 public:
  using Optimizer::Optimizer;
  const char* name() const override { return "plain-sgd"; }
  std::map<std::string, Tensor> state_tensors() const override { return {}; }
  void load_state_tensors(const std::map<std::string, Tensor>&) override {}

 protected:
  void update(size_t, Tensor& p, const Tensor& g) override {
    float* pp = p.data_ptr<float>();
    const float* gg = g.data_ptr<float>();
    for (int64_t i = 0; i < p.numel(); ++i) pp[i] = pp[i] - float(lr_) * gg[i];
  }
};

TEST(FusedUpdateStep, OptimizerWithoutAFusedKernelTakesTheTwoPassDefault) {
  const std::vector<float> p0 = {0.5f, -1.25f, 3.0f}, graw = {100.3f, -7.77f, 0.01f};
  Tensor p = Tensor::from_vector(p0, {3}).requires_grad_(true);
  Tensor out = Tensor::zeros({3}, DType::bf16);
  PlainSgd opt({p}, 0.1);
  const Tensor g = Tensor::from_vector(graw, {3}, DType::bf16);
  opt.step_fused({&g, 1}, 0.25f, {&out, 1});
  const std::vector<float> got = p.to_vector();
  for (size_t i = 0; i < 3; ++i) {
    const float expect = p0[i] - 0.1f * (float(BFloat16(graw[i])) * 0.25f);
    EXPECT_EQ(got[i], expect) << i;
    EXPECT_EQ(static_cast<const uint16_t*>(out.data())[i], BFloat16(expect).bits) << i;
  }
}

}  // namespace
}  // namespace mixprec
