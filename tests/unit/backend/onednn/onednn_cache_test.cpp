// onednn_cache_test.cpp: the oneDNN backend's primitive cache and weight-reorder cache:
// hits create nothing, keys separate what must differ, freed weights are never served
// stale, and the autocast pattern (fresh bf16 weights every step) stays bounded.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/kernels.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/onednn_stats.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using test::close_to_ref;
using test::f64;
using test::random_input;

TEST(OneDnnCache, HitCreatesNothingAndKeysSeparateShapesAndDtypes) {
  onednn::onednn_clear_primitive_cache();
  EXPECT_EQ(onednn::onednn_primitive_cache_size(), 0);
  Tensor a = random_input({4, 8}, DType::f32, 1), b = random_input({8, 3}, DType::f32, 2);
  Tensor a2 = random_input({5, 8}, DType::f32, 3);
  Tensor ab = random_input({4, 8}, DType::bf16, 4), bb = random_input({8, 3}, DType::bf16, 5);
  const int64_t c0 = onednn::onednn_primitive_creations();
  onednn::matmul(a, b, false, false);
  EXPECT_EQ(onednn::onednn_primitive_creations(), c0 + 1);
  EXPECT_EQ(onednn::onednn_primitive_cache_size(), 1);
  onednn::matmul(a, b, false, false);
  EXPECT_EQ(onednn::onednn_primitive_creations(), c0 + 1);  // hit
  onednn::matmul(a2, b, false, false);                      // other M
  onednn::matmul(ab, bb, false, false);                     // other dtype
  onednn::matmul(b, a, true, true);                         // other strides
  // Where bf16 is emulated (no AVX-512) it runs the f32 primitive of a x b: a hit.
  const int64_t expected = onednn::has_native_bf16() ? 4 : 3;
  EXPECT_EQ(onednn::onednn_primitive_creations(), c0 + expected);
  EXPECT_EQ(onednn::onednn_primitive_cache_size(), expected);
  // A hit still computes with the new call's data, not the first call's.
  Tensor a3 = random_input({4, 8}, DType::f32, 6);
  EXPECT_TRUE(close_to_ref(onednn::matmul(a3, b, false, false),
                           ref::matmul(f64(a3), f64(b), false, false), test::f32_tol(8)));
}

TEST(OneDnnCache, FreedWeightsAreNeverServedStale) {
  // A new weights tensor may land at a freed one's address with the same version (0):
  // the cache must notice the storage changed (weights_cache.h keeps a weak reference).
  // Same-size buffers freed and allocated back to back usually get the same address from
  // malloc; the test counts how often that happened so it cannot pass vacuously.
  Tensor x = random_input({16, 64}, DType::f32, 10);
  std::vector<const void*> seen;
  int reused = 0;
  for (int i = 0; i < 8; ++i) {
    Tensor w = Tensor::empty({32, 64}, DType::f32);
    float* pw = w.data_ptr<float>();
    for (int64_t j = 0; j < w.numel(); ++j) pw[j] = static_cast<float>((j * 7 + i * 13) % 17) - 8;
    if (std::find(seen.begin(), seen.end(), w.data()) != seen.end()) ++reused;
    seen.push_back(w.data());
    EXPECT_TRUE(close_to_ref(onednn::linear_forward(x, w, Tensor()),
                             ref::linear_forward(f64(x), f64(w), Tensor()), test::f32_tol(64)))
        << "iteration " << i;
  }
  EXPECT_GT(reused, 0) << "no address was reused: the stale-entry path was not exercised";
}

TEST(OneDnnCache, FreshWeightsEveryStepStayBounded) {
  // The autocast pattern: each step casts the f32 master weights to a new bf16 tensor.
  Tensor x = random_input({2, 16, 8, 8}, DType::bf16, 30, MemoryFormat::channels_last);
  Tensor master = random_input({32, 16, 3, 3}, DType::f32, 31);
  backend::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  onednn::conv2d_forward(x, master.to(DType::bf16), Tensor(), p);
  const int64_t created = onednn::onednn_primitive_creations();
  const int64_t cached = onednn::onednn_weight_cache_size();
  for (int step = 0; step < 6; ++step) {
    Tensor w = master.to(DType::bf16);  // new buffer each step
    onednn::conv2d_forward(x, w, Tensor(), p);
  }
  EXPECT_EQ(onednn::onednn_primitive_creations(), created);
  EXPECT_LE(onednn::onednn_weight_cache_size(), cached + 1);
}

TEST(OneDnnCache, ClearingTheWeightCacheOnlyCostsAReorder) {
  Tensor x = random_input({8, 32}, DType::bf16, 40);
  Tensor w = random_input({16, 32}, DType::bf16, 41);
  Tensor y1 = onednn::linear_forward(x, w, Tensor());
  onednn::onednn_clear_weight_cache();
  EXPECT_EQ(onednn::onednn_weight_cache_size(), 0);
  Tensor y2 = onednn::linear_forward(x, w, Tensor());
  EXPECT_TRUE(test::same_values(y1, y2));  // same inputs, same primitive: same bytes
}

}  // namespace
}  // namespace mixprec
