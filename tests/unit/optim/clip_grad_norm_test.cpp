// clip_grad_norm_test.cpp: optim::clip_grad_norm_ against a float64 reference: the global L2
// norm over several gradients (long ones split into chunks over the threads, odd lengths), the
// clipped values (each g * coef computed in double and rounded once), the same bits with 1 and
// 2 threads, nothing changed below max_norm or for a non-finite norm, and 16-bit gradients.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "mixprec/optim/optim.h"

namespace mixprec {
namespace {

// Parameters whose .grad holds n values each, drawn from N(0, scale).
std::vector<Tensor> params_with_grads(const std::vector<int64_t>& sizes, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<Tensor> params;
  for (int64_t n : sizes) {
    std::vector<float> g(static_cast<size_t>(n));
    for (float& v : g) v = dist(rng);
    Tensor p = Tensor::zeros({n});
    p.set_grad(Tensor::from_vector(g, {n}));
    params.push_back(p);
  }
  return params;
}

std::vector<float> all_grads(const std::vector<Tensor>& params) {
  std::vector<float> out;
  for (const Tensor& p : params)
    for (float v : p.grad().to_vector()) out.push_back(v);
  return out;
}

const std::vector<int64_t> kSizes = {100003, 7, 1 << 17, 16385};  // several chunks, odd tails

TEST(ClipGradNorm, NormAndClippedValuesMatchFloat64) {
  std::vector<Tensor> params = params_with_grads(kSizes, 0.01f, 1);
  const std::vector<float> before = all_grads(params);
  double ref = 0.0;
  for (float v : before) ref += double(v) * double(v);
  ref = std::sqrt(ref);
  const double norm = optim::clip_grad_norm_(params, 1.0);
  EXPECT_NEAR(norm, ref, 1e-12 * ref);
  ASSERT_GT(norm, 1.0);  // so it clips
  const double coef = 1.0 / (norm + 1e-6);
  const std::vector<float> after = all_grads(params);
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], float(double(before[i]) * coef)) << "value " << i;
  double clipped = 0.0;
  for (float v : after) clipped += double(v) * double(v);
  EXPECT_NEAR(std::sqrt(clipped), 1.0, 1e-6);
}

TEST(ClipGradNorm, SameBitsWithOneAndTwoThreads) {
  const int saved = omp_get_max_threads();
  std::vector<double> norms;
  std::vector<std::vector<float>> grads;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<Tensor> params = params_with_grads(kSizes, 0.02f, 2);
    norms.push_back(optim::clip_grad_norm_(params, 0.5));
    grads.push_back(all_grads(params));
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&norms[0], &norms[1], sizeof(double)), 0) << norms[0] << " vs " << norms[1];
  EXPECT_EQ(grads[0], grads[1]);
}

TEST(ClipGradNorm, BelowTheLimitOrNonFiniteLeavesGradientsAlone) {
  std::vector<Tensor> small = params_with_grads({1000, 33}, 1e-4f, 3);
  const std::vector<float> before = all_grads(small);
  EXPECT_LT(optim::clip_grad_norm_(small, 1.0), 1.0);
  EXPECT_EQ(all_grads(small), before);

  std::vector<Tensor> bad = params_with_grads({40000, 5}, 1.0f, 4);
  Tensor g = bad[0].grad();
  g.data_ptr<float>()[123] = NAN;
  const std::vector<float> with_nan = all_grads(bad);
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm_(bad, 1.0)));
  const std::vector<float> after = all_grads(bad);
  ASSERT_EQ(after.size(), with_nan.size());
  EXPECT_EQ(std::memcmp(after.data(), with_nan.data(), after.size() * sizeof(float)), 0);
}

TEST(ClipGradNorm, SixteenBitGradientsAreClippedToo) {
  Tensor p = Tensor::zeros({4}, DType::bf16);
  p.set_grad(Tensor::from_vector({3.0f, 4.0f, 0.0f, 0.0f}, {4}).to(DType::bf16));  // norm 5
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm_({p}, 1.0), 5.0);
  const std::vector<float> g = p.grad().to(DType::f32).to_vector();
  EXPECT_NEAR(g[0], 0.6, 0.004);  // bf16: 8 significant bits
  EXPECT_NEAR(g[1], 0.8, 0.004);
}

}  // namespace
}  // namespace mixprec
