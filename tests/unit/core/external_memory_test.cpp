// Tensor::from_external: a view of memory someone else owns (the Python package's
// from_numpy), held until the last tensor using it is gone, and never charged or freed by
// the tracking allocator.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mixprec/core/memory.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/tensor.h"

namespace mixprec {
namespace {

struct Owner {
  std::vector<float> values;
  bool* released = nullptr;
  ~Owner() {
    if (released) *released = true;
  }
};

TEST(ExternalMemory, ViewsTheOwnersValuesWithItsStridesAndReleasesItAfterTheLastView) {
  bool released = false;
  auto owner = std::make_shared<Owner>();
  owner->values = {1, 2, 3, 4, 5, 6};
  owner->released = &released;
  float* data = owner->values.data();
  const int64_t bytes_before = memory_stats().total_current;
  Tensor column;
  {
    // A [3, 2] view of a row-major [2, 3] buffer: the transpose, by strides.
    Tensor t = Tensor::from_external(data, {3, 2}, {1, 3}, DType::f32, std::move(owner));
    EXPECT_EQ(t.to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
    EXPECT_EQ(memory_stats().total_current, bytes_before);  // not charged
    column = t.detach();
    Tensor doubled = mul(t, 2.0);
    EXPECT_EQ(doubled.to_vector(), (std::vector<float>{2, 8, 4, 10, 6, 12}));
    t.requires_grad_(true);  // a parameter made from it: recharging must not touch counters
  }
  EXPECT_FALSE(released);  // `column` still views it
  data[0] = 42.0f;         // writes by the owner are seen: no copy was made
  EXPECT_EQ(column.at(0), 42.0);
  column = Tensor();
  EXPECT_TRUE(released);
  EXPECT_EQ(memory_stats().total_current, bytes_before);
}

TEST(ExternalMemory, RefusesNegativeStridesAndMismatchedRanks) {
  float v[4] = {};
  EXPECT_THROW(Tensor::from_external(v, {2}, {-1}, DType::f32, nullptr), Error);
  EXPECT_THROW(Tensor::from_external(v, {2, 2}, {1}, DType::f32, nullptr), Error);
  Tensor empty = Tensor::from_external(v, {0, 3}, {3, 1}, DType::f32, nullptr);
  EXPECT_EQ(empty.numel(), 0);
}

}  // namespace
}  // namespace mixprec
