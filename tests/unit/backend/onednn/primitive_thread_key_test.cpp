// primitive_thread_key_test.cpp: the primitive cache keys a primitive by the OpenMP thread
// count it was made under. oneDNN runs many primitives on the count they were created with
// (a jit convolution made for 2 threads still starts 2 after the caller dropped to 1), so the
// adaptive default (mixprec/core/threads.h) needs a primitive per count, and each count's
// primitive must be found again when the count comes back.
#include <gtest/gtest.h>

#include <omp.h>

#include "backend/kernels.h"
#include "backend/onednn/onednn_stats.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;

struct ThreadsGuard {
  int saved = omp_get_max_threads();
  ~ThreadsGuard() { omp_set_num_threads(saved); }
};

TEST(PrimitiveThreadKey, OnePrimitivePerThreadCountEachFoundAgain) {
  ThreadsGuard guard;
  onednn::onednn_clear_primitive_cache();
  Tensor a = test::random_input({64, 96}, DType::f32, 1), b = test::random_input({96, 32}, DType::f32, 2);
  const int64_t c0 = onednn::onednn_primitive_creations();
  omp_set_num_threads(2);
  const Tensor on2 = onednn::matmul(a, b, false, false);
  EXPECT_EQ(onednn::onednn_primitive_creations(), c0 + 1);
  omp_set_num_threads(1);
  const Tensor on1 = onednn::matmul(a, b, false, false);
  EXPECT_EQ(onednn::onednn_primitive_creations(), c0 + 2);  // made for 1 thread
  EXPECT_EQ(onednn::onednn_primitive_cache_size(), 2);
  omp_set_num_threads(2);
  onednn::matmul(a, b, false, false);
  omp_set_num_threads(1);
  onednn::matmul(a, b, false, false);
  EXPECT_EQ(onednn::onednn_primitive_creations(), c0 + 2);  // both found again
  // A forward product sums each output in the same order on any count: the same bits.
  ASSERT_EQ(on1.numel(), on2.numel());
  const float* x = on1.data_ptr<float>();
  const float* y = on2.data_ptr<float>();
  for (int64_t i = 0; i < on1.numel(); ++i) ASSERT_EQ(x[i], y[i]) << "element " << i;
}

}  // namespace
}  // namespace mixprec
