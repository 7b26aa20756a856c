// optim_golden_test.cpp: SGD / Adam / AdamW updates and the GradScaler's scale sequence
// against bits PyTorch 1.13 produced (tests/golden/gen_optim.py, data/optim_golden.safetensors).
// Every element of every parameter after every step, and the optimizer state after the last,
// must equal PyTorch's bit for bit, through each way training reaches the update:
//   step         .grad set, Optimizer::step() (the unfused pass)
//   step_fused   Optimizer::step_fused on gradients scaled by 2^16 with grad_scale 2^-16 and a
//                bf16 copy of the weights written in the same pass (the mixed-precision path)
//   scaler       GradScaler::step (unscale in place, then step) on 2^16-scaled .grad
//   scaler_fused GradScaler::step_fused (the default training step) on 2^16-scaled gradients
// Scaling by a power of two and back is exact for these gradients (no overflow, and a
// subnormal times 2^16 times 2^-16 is itself), so all four must give PyTorch's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "golden_compare.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/half.h"
#include "mixprec/optim/optim.h"
#include "optim/update_math.h"

namespace mixprec {
namespace {

const char* const kGoldenPath = MIXPREC_SOURCE_DIR "/tests/golden/data/optim_golden.safetensors";
const char* const kTargets[] = {"a", "b"};  // the two parameters, in the optimizer's order
constexpr int kSteps = 5;
constexpr float kLossScale = 65536.0f;

golden_check::GoldenFile& golden() {
  static golden_check::GoldenFile file(kGoldenPath, "tests/golden/gen_optim.py");
  return file;
}

class OptimGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(golden().load()); }
  static void TearDownTestSuite() { golden().reset(); }
  void SetUp() override {
    if (!golden().loaded()) GTEST_SKIP() << "golden file did not load (reported by SetUpTestSuite)";
  }
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// "key=value key=value" -> map (the generator's metadata strings).
std::map<std::string, std::string> parse_config(const std::string& text) {
  std::map<std::string, std::string> kv;
  for (const std::string& item : split(text, ' ')) {
    const size_t eq = item.find('=');
    kv[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
  }
  return kv;
}

double num(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) ADD_FAILURE() << "config has no '" << key << "'";
  return it == kv.end() ? 0.0 : std::stod(it->second);  // strtod: correctly rounded
}
bool flag(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) ADD_FAILURE() << "config has no '" << key << "'";
  return it != kv.end() && it->second == "true";
}

std::string hex(uint32_t b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", b);
  return buf;
}

std::vector<uint32_t> f32_bits(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint32_t> out(size_t(c.numel()));
  std::memcpy(out.data(), c.data(), out.size() * 4);
  return out;
}

// Every element's bits; on failure the first mismatch (flat index, both values in hex and
// decimal) and how many there are.
::testing::AssertionResult same_bits(const std::string& what, const Tensor& actual, const Tensor& expected) {
  if (!actual.defined()) return ::testing::AssertionFailure() << what << ": undefined";
  if (actual.dtype() != DType::f32 || expected.dtype() != DType::f32 || actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << what << ": got " << actual.str() << ", expected " << expected.str();
  const std::vector<uint32_t> a = f32_bits(actual), e = f32_bits(expected);
  int64_t first = -1, count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != e[i]) {
      if (first < 0) first = int64_t(i);
      ++count;
    }
  if (count == 0) return ::testing::AssertionSuccess();
  float av, ev;
  std::memcpy(&av, &a[size_t(first)], 4);
  std::memcpy(&ev, &e[size_t(first)], 4);
  char vals[96];
  std::snprintf(vals, sizeof vals, " (%.9g vs %.9g)", double(av), double(ev));
  return ::testing::AssertionFailure() << what << ": " << count << " of " << a.size()
                                       << " elements differ; first at index " << first << ": mixprec "
                                       << hex(a[size_t(first)]) << ", PyTorch " << hex(e[size_t(first)]) << vals;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::map<std::string, std::string>& kv,
                                                 std::vector<Tensor> params) {
  const std::string kind = kv.at("optimizer");
  if (kind == "sgd") {
    optim::SGDOptions o;
    o.lr = num(kv, "lr");
    o.momentum = num(kv, "momentum");
    o.dampening = num(kv, "dampening");
    o.weight_decay = num(kv, "weight_decay");
    o.nesterov = flag(kv, "nesterov");
    o.maximize = flag(kv, "maximize");
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  optim::AdamOptions o;
  o.lr = num(kv, "lr");
  o.beta1 = num(kv, "beta1");
  o.beta2 = num(kv, "beta2");
  o.eps = num(kv, "eps");
  o.weight_decay = num(kv, "weight_decay");
  o.amsgrad = flag(kv, "amsgrad");
  o.maximize = flag(kv, "maximize");
  if (kind == "adamw") return std::make_unique<optim::AdamW>(std::move(params), o);
  EXPECT_EQ(kind, "adam");
  return std::make_unique<optim::Adam>(std::move(params), o);
}

enum class Mode { step, step_fused, scaler, scaler_fused };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::step: return "step";
    case Mode::step_fused: return "step_fused";
    case Mode::scaler: return "scaler";
    default: return "scaler_fused";
  }
}

// One configuration through one path: 5 steps, every parameter compared after every step,
// the state after the last.
void run_config(const std::string& name, Mode mode) {
  const auto& g = golden();
  const auto kv = parse_config(g.metadata().at("config." + name));
  std::vector<Tensor> params;
  for (const char* t : kTargets) params.push_back(g(std::string("p0.") + t).clone().requires_grad_(true));
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(kv, params);
  // growth_interval beyond the run: the scale stays 2^16, so 1/scale is exactly 2^-16.
  amp::GradScaler scaler({.init_scale = kLossScale, .growth_interval = 1000});
  std::vector<Tensor> rounded;
  for (const Tensor& p : params) rounded.push_back(Tensor::zeros(p.shape(), DType::bf16));

  for (int k = 1; k <= kSteps; ++k) {
    std::vector<Tensor> grads;
    for (const char* t : kTargets) {
      Tensor grad = g("grad" + std::to_string(k) + "." + t).clone();
      if (mode != Mode::step) {
        float* d = grad.data_ptr<float>();
        for (int64_t i = 0; i < grad.numel(); ++i) d[i] = d[i] * kLossScale;  // exact: a power of two
      }
      grads.push_back(grad);
    }
    switch (mode) {
      case Mode::step:
        for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[i]);
        opt->step();
        break;
      case Mode::step_fused:
        opt->step_fused(grads, 1.0f / kLossScale, rounded);
        break;
      case Mode::scaler:
        for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads[i]);
        ASSERT_TRUE(scaler.step(*opt));
        scaler.update();
        break;
      case Mode::scaler_fused:
        ASSERT_TRUE(scaler.step_fused(*opt, grads, rounded));
        scaler.update();
        break;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string key = name + ".step" + std::to_string(k) + "." + kTargets[i];
      EXPECT_TRUE(same_bits(key, params[i], g(key)));
    }
  }
  // The bf16 copy written in the fused pass: the final f32 parameter rounded to nearest even.
  if (mode == Mode::step_fused || mode == Mode::scaler_fused)
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> p = params[i].to_vector();
      const uint16_t* got = rounded[i].data_ptr<uint16_t>();
      int64_t wrong = 0;
      for (size_t j = 0; j < p.size(); ++j) wrong += got[j] != BFloat16(p[j]).bits;
      EXPECT_EQ(wrong, 0) << name << " rounded bf16 copy of " << kTargets[i];
    }
  // State after the last step, under PyTorch's names; mixprec's are "<name>.<param index>".
  // Which names PyTorch kept follows from the config (the generator wrote exactly those).
  const std::string kind = kv.at("optimizer");
  const std::vector<std::string> kept =
      kind == "sgd" ? (num(kv, "momentum") != 0 ? std::vector<std::string>{"momentum_buffer"}
                                                : std::vector<std::string>{})
                    : (flag(kv, "amsgrad") ? std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
                                           : std::vector<std::string>{"exp_avg", "exp_avg_sq"});
  const auto state = opt->state_tensors();
  EXPECT_EQ(state.size(), kept.size() * params.size()) << name << ": mixprec keeps other state than PyTorch";
  for (const std::string& sname : kept)
    for (size_t i = 0; i < params.size(); ++i) {
      const auto it = state.find(sname + "." + std::to_string(i));
      const std::string gkey = name + "." + sname + "." + kTargets[i];
      if (it == state.end()) {
        ADD_FAILURE() << name << ": no state '" << sname << "." << i << "'";
        continue;
      }
      EXPECT_TRUE(same_bits(gkey, it->second, g(gkey)));
    }
}

TEST_F(OptimGolden, FileHasEveryConfigAndProvenance) {
  const auto& meta = golden().metadata();
  EXPECT_EQ(meta.at("generator"), "tests/golden/gen_optim.py");
  EXPECT_EQ(meta.at("steps"), std::to_string(kSteps));
  EXPECT_EQ(split(meta.at("configs"), ',').size(), 13u);
  EXPECT_EQ(split(meta.at("scaler_configs"), ',').size(), 4u);
  std::printf("golden from torch %s (CPU capability %s); mixprec's update path here: %s\n",
              meta.at("torch").c_str(), meta.at("cpu_capability").c_str(), optim::update_math_isa());
  // a [519] takes ATen's vector body and 7-element scalar tail; b [3, 5] only the tail.
  EXPECT_EQ(golden()("p0.a").numel(), 519);
  EXPECT_EQ(golden()("p0.b").numel(), 15);
}

TEST_F(OptimGolden, UnfusedStepMatchesPyTorchBitForBit) {
  for (const std::string& name : split(golden().metadata().at("configs"), ',')) {
    SCOPED_TRACE(name);
    run_config(name, Mode::step);
  }
}

TEST_F(OptimGolden, FusedStepWithUnscaleAndBf16CopyMatchesPyTorchBitForBit) {
  for (const std::string& name : split(golden().metadata().at("configs"), ',')) {
    SCOPED_TRACE(name);
    run_config(name, Mode::step_fused);
  }
}

TEST_F(OptimGolden, GradScalerStepMatchesPyTorchBitForBit) {
  for (const std::string& name : split(golden().metadata().at("configs"), ',')) {
    SCOPED_TRACE(name);
    run_config(name, Mode::scaler);
  }
}

TEST_F(OptimGolden, GradScalerFusedStepMatchesPyTorchBitForBit) {
  for (const std::string& name : split(golden().metadata().at("configs"), ',')) {
    SCOPED_TRACE(name);
    run_config(name, Mode::scaler_fused);
  }
}

// The scale after each update(): overflow or not per the golden found_inf sequence (a NaN
// gradient where it says 1), non-default growth/backoff factors and intervals.
TEST_F(OptimGolden, GradScalerScaleSequenceMatchesPyTorchBitForBit) {
  const auto& meta = golden().metadata();
  for (const std::string& name : split(meta.at("scaler_configs"), ',')) {
    SCOPED_TRACE(name);
    const auto kv = parse_config(meta.at("scaler." + name));
    const Tensor& found = golden()("scaler." + name + ".found_inf");
    const Tensor& expected = golden()("scaler." + name + ".scale");
    ASSERT_EQ(found.dtype(), DType::i32);
    amp::GradScaler scaler({.init_scale = num(kv, "init_scale"),
                            .growth_factor = num(kv, "growth_factor"),
                            .backoff_factor = num(kv, "backoff_factor"),
                            .growth_interval = int64_t(num(kv, "growth_interval"))});
    Tensor param = Tensor::zeros({2}).requires_grad_(true);
    optim::SGD opt({param}, {.lr = 0.0});
    const int32_t* inf = found.data_ptr<int32_t>();
    std::vector<float> got;
    for (int64_t u = 0; u < found.numel(); ++u) {
      param.set_grad(Tensor::from_vector({1.0f, inf[u] ? NAN : 2.0f}, {2}));
      EXPECT_EQ(scaler.step(opt), inf[u] == 0) << "update " << u;
      scaler.update();
      got.push_back(float(scaler.get_scale()));
    }
    EXPECT_TRUE(same_bits("scaler." + name + ".scale", Tensor::from_vector(got, {int64_t(got.size())}), expected));
  }
}

}  // namespace
}  // namespace mixprec
