// precision_test.cpp: presets, f32 master weights (O2) and half-precision inference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/convert.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/nn/models.h"
#include "mixprec/nn/nn.h"
#include "mixprec/ops/ops.h"
#include "mixprec/optim/optim.h"
#include "mixprec/amp/precision.h"

namespace mixprec::amp {
namespace {

TEST(Presets, AllNamesResolveWithTheirRoles) {
  struct Row { const char* name; bool autocast; DType param; bool masters; bool scaler; };
  const Row rows[] = {{"fp32", false, DType::f32, false, false},
                      {"amp-bf16", true, DType::f32, false, false},
                      {"amp-fp16", true, DType::f32, false, true},
                      {"o2-bf16", false, DType::bf16, true, false},
                      {"o2-fp16", false, DType::f16, true, true},
                      {"pure-bf16", false, DType::bf16, false, false},
                      {"pure-fp16", false, DType::f16, false, false}};
  for (const Row& r : rows) {
    auto p = preset_by_name(r.name);
    ASSERT_TRUE(p.is_ok()) << r.name;
    EXPECT_EQ(p->autocast_dtype.has_value(), r.autocast) << r.name;
    EXPECT_EQ(p->param_dtype, r.param) << r.name;
    EXPECT_EQ(p->master_weights, r.masters) << r.name;
    EXPECT_EQ(p->loss_scaling, r.scaler) << r.name;
  }
  EXPECT_EQ(all_presets().size(), 7u);
}

TEST(Presets, ApexLevelsAndJmpStrings) {
  EXPECT_EQ(preset_by_name("O0")->name, "fp32");
  EXPECT_EQ(preset_by_name("O1")->name, "amp-bf16");
  EXPECT_EQ(preset_by_name("O2")->name, "o2-bf16");
  EXPECT_EQ(preset_by_name("O3")->name, "pure-bf16");
  EXPECT_EQ(preset_by_name("params=float32,compute=bfloat16,output=float32")->name, "amp-bf16");
  EXPECT_EQ(preset_by_name("params=float32,compute=float16")->name, "amp-fp16");
  EXPECT_EQ(preset_by_name("p=bf16,c=bf16")->name, "o2-bf16");
  EXPECT_EQ(preset_by_name("params=float32,compute=float32")->name, "fp32");
}

TEST(Presets, UnknownNameListsTheAcceptedOnes) {
  auto p = preset_by_name("fp8");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("amp-bf16"), std::string::npos) << p.status().message();
  EXPECT_FALSE(preset_by_name("params=float64").is_ok());
  EXPECT_FALSE(preset_by_name("params=bfloat16,compute=float16").is_ok());
  EXPECT_FALSE(preset_by_name("colour=blue").is_ok());
}

// Every 16-bit weight must equal its f32 master rounded to nearest even (bit-exact).
void expect_weights_are_rounded_masters(const MasterWeights& mw,
                                        const std::vector<std::pair<std::string, Tensor>>& model) {
  for (size_t i = 0; i < model.size(); ++i) {
    const Tensor& p = model[i].second;
    const Tensor& m = mw.masters()[i];
    ASSERT_EQ(m.dtype(), DType::f32);
    if (p.dtype() == DType::f32) continue;
    const Tensor pc = p.contiguous(), mc = m.contiguous();
    std::vector<uint16_t> expect(size_t(m.numel()));
    convert_elements(mc.data(), DType::f32, expect.data(), p.dtype(), m.numel());
    EXPECT_EQ(std::memcmp(pc.data(), expect.data(), expect.size() * 2), 0) << model[i].first;
  }
}

TEST(MasterWeights, AfterEveryStepWeightsAreTheirMastersRounded) {
  for (DType half : {DType::bf16, DType::f16}) {
    manual_seed(1);
    nn::Cnn model(1, 8, 8, 10);
    model.to(half);
    const auto named = model.named_parameters();
    MasterWeights mw(named);
    optim::Adam opt(mw.masters(), {.lr = 1e-2});
    manual_seed(2);
    const Tensor x = Tensor::normal({4, 1, 8, 8}, 0, 1);
    const Tensor y = Tensor::from_vector_i64({0, 1, 2, 3}, {4});
    for (int step = 0; step < 3; ++step) {
      mw.zero_grad();
      cross_entropy(model(x.to(half)), y).backward();
      mw.accumulate_grads();
      for (const auto& m : mw.masters()) ASSERT_EQ(m.grad().dtype(), DType::f32);
      opt.step();
      mw.copy_to_model();
      expect_weights_are_rounded_masters(mw, named);
    }
  }
}

TEST(MasterWeights, GradientsAccumulateInF32AcrossMicroBatches) {
  // 256 micro-batches each adding 1/256 + 2^-12: in bf16 the running sum would stall once it
  // reaches ~1 (its spacing there is 2^-7); in f32 it sums exactly.
  Tensor w = Tensor::full({1}, 1.0, DType::bf16).requires_grad_(true);
  MasterWeights mw({{"w", w}});
  const double per = 1.0 / 256 + 1.0 / 4096;
  for (int i = 0; i < 256; ++i) {
    sum(mul(w, Tensor::full({1}, per, DType::bf16))).backward();
    mw.accumulate_grads();
  }
  const double bf16_per = Tensor::full({1}, per, DType::bf16).item();  // the f16-rounded factor
  EXPECT_NEAR(mw.masters()[0].grad().item(), 256 * bf16_per, 1e-6);
}

TEST(MasterWeights, SkippedStepLeavesWeightsMastersAndOptimizerStateBitIdentical) {
  manual_seed(3);
  nn::Linear layer(6, 3);
  layer.to(DType::f16);
  const auto named = layer.named_parameters();
  MasterWeights mw(named);
  optim::Adam opt(mw.masters());
  GradScaler scaler({.init_scale = 1024});
  const Tensor x = Tensor::ones({2, 6}, DType::f16);
  auto snapshot = [&] {
    std::vector<std::vector<double>> s;
    for (auto& [n, p] : named) s.push_back(p.to_vector_f64());
    for (auto& m : mw.masters()) s.push_back(m.to_vector_f64());
    for (auto& [n, t] : opt.state_tensors()) s.push_back(t.to_vector_f64());
    return s;
  };
  // One clean step so Adam has state.
  scaler.scale(sum(layer(x))).backward();
  mw.accumulate_grads();
  ASSERT_TRUE(scaler.step(opt));
  scaler.update();
  mw.copy_to_model();
  const auto before = snapshot();
  // An overflowing step.
  mw.zero_grad();
  scaler.scale(sum(layer(x))).backward();
  mw.accumulate_grads();
  mw.masters()[0].grad().data_ptr<float>()[4] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  ASSERT_EQ(scaler.last_nonfinite().size(), 1u);
  EXPECT_EQ(scaler.last_nonfinite()[0].first_index, 4);
}

TEST(MasterWeights, NormalizationLayersStayF32UnderO2) {
  nn::Sequential net({std::make_shared<nn::Linear>(4, 4), std::make_shared<nn::LayerNorm>(Shape{4}),
                      std::make_shared<nn::Linear>(4, 2)});
  net.to(DType::bf16, /*keep_normalization_fp32=*/true);
  for (auto& [name, p] : net.named_parameters())
    EXPECT_EQ(p.dtype(), name.rfind("1.", 0) == 0 ? DType::f32 : DType::bf16) << name;
  MasterWeights mw(net.named_parameters());
  // An f32 parameter is its own master (no copy).
  EXPECT_TRUE(mw.masters()[2].same(net.named_parameters()[2].second));
  // bf16 activations meet the f32 norm: the output is usable and the graph trains.
  Tensor y = net(Tensor::ones({3, 4}, DType::bf16));
  sum(y.to(DType::f32)).backward();
  mw.accumulate_grads();
  for (auto& m : mw.masters()) EXPECT_TRUE(m.grad().defined());
}

TEST(HalfInference, ModuleToHalfRunsInHalfAndAgreesWithF32) {
  for (DType half : {DType::bf16, DType::f16}) {
    manual_seed(4);
    nn::Cnn model(1, 8, 8, 10);
    model.eval();
    manual_seed(5);
    const Tensor x = Tensor::normal({4, 1, 8, 8}, 0, 1);
    NoGradGuard ng;
    const auto ref = model(x).to_vector();
    model.to(half);
    for (auto& [n, p] : model.named_parameters()) EXPECT_EQ(p.dtype(), half);
    Tensor y = model(x.to(half));
    EXPECT_EQ(y.dtype(), half);
    const auto got = y.to_vector();
    // bf16 keeps 8 bits: logits of this small net agree to ~2% of their scale; f16 to ~0.3%.
    float mx = 0;
    for (float v : ref) mx = std::max(mx, std::fabs(v));
    const float tol = (half == DType::bf16 ? 0.03f : 0.005f) * mx;
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], tol) << dtype_name(half) << " " << i;
  }
}

}  // namespace
}  // namespace mixprec::amp
