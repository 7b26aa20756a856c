// fused_update_kernel_test.cpp: the optimizer passes against plain per-element loops written
// here in PyTorch 1.13's single-tensor order and rounding (f32, std::fma where ATen fuses;
// tests/golden/optim_golden_test.cpp checks the same against PyTorch's own bits), bit for bit: every length class
// (AVX-512 body, masked tail, several tiles, the threaded range), every gradient dtype with
// and without unscaling, 16-bit parameters, the rounded 16-bit copy, and the read-only
// inf/NaN count. The 16-bit rounding reference is half.h's scalar code, not convert.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "core/nonfinite_scan.h"
#include "mixprec/core/half.h"
#include "mixprec/optim/optim.h"
#include "optim/update_math.h"

namespace mixprec::optim {
namespace {

// Lengths: one element, a partial vector, vector + tail, several 1024-element tiles with a
// tail, and one past the 64Ki-element threshold where the pass is split over threads.
const int64_t kLengths[] = {1, 15, 33, 3 * 1024 + 7, 70001};

std::vector<float> randn(int64_t n, uint64_t seed, float stddev = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

float round_to(DType d, float x) {
  return d == DType::bf16 ? float(BFloat16(x)) : d == DType::f16 ? float(Half(x)) : x;
}
uint16_t bits16(DType d, float x) { return d == DType::bf16 ? BFloat16(x).bits : Half(x).bits; }

std::vector<uint32_t> f32_bits(const Tensor& t) {
  std::vector<uint32_t> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.data(), out.size() * 4);
  return out;
}
std::vector<uint32_t> f32_bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

// The expected Adam/AdamW step on plain vectors: PyTorch 1.13's _single_tensor_adam(w) op by
// op, each op rounding to f32 once, std::fma where its ATen kernel fuses (add_ with alpha,
// addcmul_), Python's double scalars cast to f32 where the kernel takes them.
void reference_adam(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                    std::vector<float>& v, int64_t step, const AdamOptions& o, bool decoupled) {
  const double bc1 = 1.0 - std::pow(o.beta1, double(step)), bc2 = 1.0 - std::pow(o.beta2, double(step));
  const float b1 = float(o.beta1), b2 = float(o.beta2), omb1 = float(1.0 - o.beta1), omb2 = float(1.0 - o.beta2);
  const float neg_step = float(-(o.lr / bc1)), bc2_sqrt = float(std::sqrt(bc2)), eps = float(o.eps);
  const float decay = float(1.0 - o.lr * o.weight_decay), wd = float(o.weight_decay);
  for (size_t i = 0; i < p.size(); ++i) {
    float gi = g[i];
    if (decoupled) p[i] = p[i] * decay;                            // param.mul_(1 - lr * wd)
    else if (o.weight_decay != 0) gi = std::fma(p[i], wd, gi);     // grad.add(param, alpha=wd)
    m[i] = std::fma(gi, omb1, m[i] * b1);                          // mul_(b1).add_(grad, alpha=1-b1)
    v[i] = std::fma(omb2 * gi, gi, v[i] * b2);                     // mul_(b2).addcmul_(grad, grad, value=1-b2)
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;          // (sqrt / bc2_sqrt).add_(eps)
    p[i] = (neg_step * m[i]) / denom + p[i];                       // addcdiv_(m, denom, value=-step_size)
  }
}

void reference_sgd(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& buf, bool first,
                   const SGDOptions& o) {
  const float neg_lr = float(-o.lr), mom = float(o.momentum), omd = float(1.0 - o.dampening);
  const float wd = float(o.weight_decay);
  for (size_t i = 0; i < p.size(); ++i) {
    float d = g[i];
    if (o.weight_decay != 0) d = std::fma(p[i], wd, d);            // d_p.add(param, alpha=wd)
    if (o.momentum != 0) {
      buf[i] = first ? d : std::fma(d, omd, buf[i] * mom);          // buf.mul_(mom).add_(d_p, alpha=1-damp)
      d = o.nesterov ? std::fma(buf[i], mom, d) : buf[i];           // d_p.add(buf, alpha=mom)
    }
    p[i] = std::fma(d, neg_lr, p[i]);                                // param.add_(d_p, alpha=-lr)
  }
}

// The gradient as the update sees it: widened from its dtype, times the scale in f32.
std::vector<float> seen_grad(const std::vector<float>& raw, DType dtype, float scale) {
  std::vector<float> g(raw.size());
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = round_to(dtype, raw[i]);
    if (scale != 1.0f) g[i] = g[i] * scale;
  }
  return g;
}

TEST(FusedUpdateKernel, AdamAndAdamWMatchThePyTorchOrderLoopBitForBit) {
  struct Variant { const char* name; double wd; bool decoupled; };
  const Variant variants[] = {{"adam", 0.0, false}, {"adam-l2", 0.01, false}, {"adamw", 0.01, true}};
  for (const Variant& var : variants)
    for (int64_t n : kLengths)
      for (DType gd : {DType::f32, DType::bf16, DType::f16})
        for (float scale : {1.0f, 1.0f / 1024}) {
          SCOPED_TRACE(std::string(var.name) + " n=" + std::to_string(n) + " grad " + dtype_name(gd) +
                       " scale " + std::to_string(scale));
          std::vector<float> p = randn(n, 1), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
          Tensor param = Tensor::from_vector(p, {n}).requires_grad_(true);
          AdamOptions o{.lr = 1e-2, .weight_decay = var.wd};
          Adam opt({param}, o, var.decoupled);
          for (int64_t step = 1; step <= 3; ++step) {
            const std::vector<float> raw = randn(n, 10 + uint64_t(step), scale == 1.0f ? 1.0f : 1024.0f);
            const Tensor g = Tensor::from_vector(raw, {n}, gd);
            opt.step_fused({&g, 1}, scale);
            reference_adam(p, seen_grad(raw, gd, scale), m, v, step, o, var.decoupled);
          }
          const auto state = opt.state_tensors();
          EXPECT_EQ(f32_bits(param), f32_bits(p));
          EXPECT_EQ(f32_bits(state.at("exp_avg.0")), f32_bits(m));
          EXPECT_EQ(f32_bits(state.at("exp_avg_sq.0")), f32_bits(v));
        }
}

TEST(FusedUpdateKernel, SgdVariantsMatchThePyTorchOrderLoopBitForBit) {
  const SGDOptions variants[] = {{.lr = 0.1},
                                 {.lr = 0.1, .weight_decay = 1e-3},
                                 {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-3},
                                 {.lr = 0.1, .momentum = 0.9, .nesterov = true}};
  for (const SGDOptions& o : variants)
    for (int64_t n : kLengths)
      for (DType gd : {DType::f32, DType::bf16}) {
        SCOPED_TRACE("momentum " + std::to_string(o.momentum) + " nesterov " + std::to_string(o.nesterov) +
                     " n=" + std::to_string(n) + " grad " + dtype_name(gd));
        std::vector<float> p = randn(n, 2), buf(size_t(n), 0.0f);
        Tensor param = Tensor::from_vector(p, {n}).requires_grad_(true);
        SGD opt({param}, o);
        for (int step = 1; step <= 3; ++step) {
          const std::vector<float> raw = randn(n, 20 + uint64_t(step), 256.0f);
          const Tensor g = Tensor::from_vector(raw, {n}, gd);
          opt.step_fused({&g, 1}, 1.0f / 256);
          reference_sgd(p, seen_grad(raw, gd, 1.0f / 256), buf, step == 1, o);
        }
        EXPECT_EQ(f32_bits(param), f32_bits(p));
        if (o.momentum != 0) EXPECT_EQ(f32_bits(opt.state_tensors().at("momentum_buffer.0")), f32_bits(buf));
      }
}

TEST(FusedUpdateKernel, SixteenBitParametersAndStateRoundOncePerStep) {
  // pure-* presets: the update runs in f32 on widened values; parameter and moments are
  // rounded back once per step.
  for (DType d : {DType::bf16, DType::f16})
    for (int64_t n : {int64_t(33), int64_t(70001)}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " n=" + std::to_string(n));
      std::vector<float> p = randn(n, 3), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
      for (float& x : p) x = round_to(d, x);
      Tensor param = Tensor::from_vector(p, {n}, d).requires_grad_(true);
      const AdamOptions o{.lr = 1e-2};
      Adam opt({param}, o);
      for (int64_t step = 1; step <= 2; ++step) {
        const std::vector<float> raw = randn(n, 30 + uint64_t(step));
        param.set_grad(Tensor::from_vector(raw, {n}, d));
        opt.step();
        reference_adam(p, seen_grad(raw, d, 1.0f), m, v, step, o, false);
        for (size_t i = 0; i < p.size(); ++i) {
          p[i] = round_to(d, p[i]);
          m[i] = round_to(d, m[i]);
          v[i] = round_to(d, v[i]);
        }
      }
      const Tensor got = param.to(DType::f32);
      EXPECT_EQ(f32_bits(got), f32_bits(p));
      EXPECT_EQ(f32_bits(opt.state_tensors().at("exp_avg_sq.0").to(DType::f32)), f32_bits(v));
    }
}

TEST(FusedUpdateKernel, RoundedOutputIsTheUpdatedParameterRoundedToNearestEven) {
  for (DType d : {DType::bf16, DType::f16})
    for (int64_t n : kLengths) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " n=" + std::to_string(n));
      std::vector<float> p = randn(n, 4);
      std::vector<float> grad = randn(n, 5);
      p[0] = 1e-40f;  // an f32 subnormal that stays one (zero gradient): bf16 hardware would flush it
      grad[0] = 0.0f;
      Tensor param = Tensor::from_vector(p, {n}).requires_grad_(true);
      Tensor out = Tensor::zeros({n}, d);
      SGD opt({param}, {.lr = 0.5});
      const Tensor g = Tensor::from_vector(grad, {n}, d);
      opt.step_fused({&g, 1}, 1.0f, {&out, 1});
      const std::vector<float> updated = param.to_vector();
      ASSERT_EQ(out.dtype(), d);
      const uint16_t* got = static_cast<const uint16_t*>(out.data());
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) mismatches += got[i] != bits16(d, updated[size_t(i)]);
      EXPECT_EQ(mismatches, 0);
    }
}

TEST(FusedUpdateKernel, ScalarFallbackGivesTheVectorPathsBits) {
  // CPUs without AVX2+FMA run the scalar loops (std::fma); the vector path this CPU takes
  // (printed) must agree with them exactly, body and masked tail, for every option.
  std::printf("update_math path on this CPU: %s\n", update_math_isa());
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(1037)})
    for (bool decoupled : {false, true})
      for (bool amsgrad : {false, true})
        for (bool maximize : {false, true}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " decoupled " + std::to_string(decoupled) + " amsgrad " +
                       std::to_string(amsgrad) + " maximize " + std::to_string(maximize));
          const AdamCoeffs a = adam_coeffs(1e-3, 0.9, 0.999, 1e-8, 0.01, decoupled, amsgrad, maximize, 3);
          const SgdCoeffs s = sgd_coeffs(0.1, 0.9, 0.25, 1e-3, !decoupled && !amsgrad, false, maximize);
          std::vector<float> p1 = randn(n, 40), m1 = randn(n, 41, 0.1f), v1 = randn(n, 42, 0.1f), x1 = randn(n, 45);
          for (float& x : v1) x = x * x;
          for (float& x : x1) x = x * x * 0.01f;
          std::vector<float> p2 = p1, m2 = m1, v2 = v1, x2 = x1, b1 = randn(n, 44), b2 = b1;
          const std::vector<float> g = randn(n, 43);
          adam_tile(p1.data(), g.data(), m1.data(), v1.data(), x1.data(), n, a);
          adam_tile_scalar(p2.data(), g.data(), m2.data(), v2.data(), x2.data(), n, a);
          EXPECT_EQ(f32_bits(p1), f32_bits(p2));
          EXPECT_EQ(f32_bits(m1), f32_bits(m2));
          EXPECT_EQ(f32_bits(v1), f32_bits(v2));
          EXPECT_EQ(f32_bits(x1), f32_bits(x2));
          sgd_tile(p1.data(), g.data(), b1.data(), n, s);
          sgd_tile_scalar(p2.data(), g.data(), b2.data(), n, s);
          EXPECT_EQ(f32_bits(p1), f32_bits(p2));
          EXPECT_EQ(f32_bits(b1), f32_bits(b2));
        }
}

TEST(FusedUpdateKernel, ResultsAreTheSameOnOneAndTwoThreads) {
  const int saved = omp_get_max_threads();
  const int64_t n = 200003;
  std::vector<uint32_t> results[2];
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    Tensor param = Tensor::from_vector(randn(n, 6), {n}).requires_grad_(true);
    Tensor out = Tensor::zeros({n}, DType::bf16);
    AdamW opt({param});
    for (int step = 0; step < 2; ++step) {
      const Tensor g = Tensor::from_vector(randn(n, 7 + uint64_t(step)), {n}, DType::bf16);
      opt.step_fused({&g, 1}, 0.5f, {&out, 1});
    }
    results[threads - 1] = f32_bits(param);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
}

TEST(FusedUpdateKernel, NonfiniteCheckCountsInfAndNanInEveryDtypeWithoutWriting) {
  const int64_t n = 300001;  // threaded, several tiles
  for (DType d : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(d));
    std::vector<double> v(size_t(n), 0.5);
    v[7] = -std::numeric_limits<double>::infinity();
    v[150001] = std::numeric_limits<double>::infinity();
    v[size_t(n - 1)] = std::numeric_limits<double>::quiet_NaN();
    v[9] = 65504.0;  // the largest f16: finite
    const Tensor g = Tensor::from_vector_f64(v, {n}, d);
    const std::vector<double> before = g.to_vector_f64();
    const UnscaleResult r = mixprec::find_nonfinite(g);
    EXPECT_EQ(r.nonfinite, 3);
    EXPECT_EQ(r.first_index, 7);
    const std::vector<double> after = g.to_vector_f64();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * 8), 0);
    const UnscaleResult clean = mixprec::find_nonfinite(Tensor::ones({n}, d));
    EXPECT_EQ(clean.nonfinite, 0);
    EXPECT_EQ(clean.first_index, -1);
  }
}

TEST(FusedUpdateKernel, UnscaleOfSixteenBitGradientsRoundsOnceWithoutAHeapBuffer) {
  const int64_t n = 200001;
  const float inv = 1.0f / 3.0f;  // not a power of two: the product must be rounded
  for (DType d : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(d));
    const std::vector<float> raw = randn(n, 8, 100.0f);
    Tensor g = Tensor::from_vector(raw, {n}, d);
    g.data_ptr<uint16_t>()[12345] = d == DType::bf16 ? 0x7fc0 : 0x7e00;  // NaN
    const UnscaleResult r = mixprec::unscale_and_check(g, inv);
    EXPECT_EQ(r.nonfinite, 1);
    EXPECT_EQ(r.first_index, 12345);
    const uint16_t* got = g.data_ptr<uint16_t>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i)
      if (i != 12345) mismatches += got[i] != bits16(d, round_to(d, raw[size_t(i)]) * inv);
    EXPECT_EQ(mismatches, 0);
  }
}

}  // namespace
}  // namespace mixprec::optim
