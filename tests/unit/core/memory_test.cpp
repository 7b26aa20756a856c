// memory_test.cpp: the tracking allocator's figures by category, peaks, and the caching
// allocator (a steady-state training step makes no heap allocation for tensor buffers).
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sanitizer/asan_interface.h>
#include <string>

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/data/data.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "mixprec/amp/precision.h"
#include "train/precision_step.h"
#include "common/asan.h"

namespace mixprec {
namespace {

TEST(Memory, BytesAreChargedToTheCategoryInForce) {
  const int64_t act0 = current_bytes(MemoryCategory::activations);
  const int64_t opt0 = current_bytes(MemoryCategory::optimizer_state);
  {
    Tensor a = Tensor::empty({1000}, DType::f32);
    EXPECT_EQ(current_bytes(MemoryCategory::activations) - act0, 4000);
    MemoryCategoryGuard g(MemoryCategory::optimizer_state);
    Tensor b = Tensor::empty({10}, DType::bf16);
    EXPECT_EQ(current_bytes(MemoryCategory::optimizer_state) - opt0, 20);
  }
  EXPECT_EQ(current_bytes(MemoryCategory::activations), act0);
  EXPECT_EQ(current_bytes(MemoryCategory::optimizer_state), opt0);
  EXPECT_EQ(current_memory_category(), MemoryCategory::activations);
}

TEST(Memory, PeakRemembersTheHighWaterMarkUntilReset) {
  reset_peak_memory();
  const int64_t base = peak_bytes(MemoryCategory::activations);
  { Tensor big = Tensor::empty({1 << 20}, DType::f32); }
  EXPECT_EQ(peak_bytes(MemoryCategory::activations) - base, 4 << 20);
  reset_peak_memory();
  EXPECT_EQ(peak_bytes(MemoryCategory::activations), current_bytes(MemoryCategory::activations));
}

TEST(Memory, FreedBlocksAreReusedWithoutHeapAllocation) {
  { Tensor warm = Tensor::empty({12345}, DType::f32); }
  const int64_t before = allocation_count();
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty({12345}, DType::f32);
  EXPECT_EQ(allocation_count(), before);
  Tensor distinct = Tensor::empty({99991}, DType::f32);  // a new size does allocate
  EXPECT_EQ(allocation_count(), before + 1);
}

// Under ASan (scripts/sanitize) the block cache must not hide a use after release: a block
// waiting in the cache is poisoned, so a dangling read is reported as for malloc's blocks,
// and a live block is addressable up to its bytes only.
TEST(Memory, UnderAsanACachedBlockIsPoisonedAndALiveOneOnlyUpToItsBytes) {
#ifndef MIXPREC_TEST_ASAN
  GTEST_SKIP() << "not built with AddressSanitizer (scripts/sanitize builds with it)";
#else
  char* p = nullptr;
  {
    Tensor t = Tensor::empty({13}, DType::f32);  // 52 bytes in a 64-byte block
    p = static_cast<char*>(t.data());
    EXPECT_EQ(__asan_region_is_poisoned(p, 52), nullptr);
    EXPECT_EQ(__asan_region_is_poisoned(p, 64), p + 52);
  }
  EXPECT_TRUE(__asan_address_is_poisoned(p));  // released: waiting in the cache
  EXPECT_TRUE(__asan_address_is_poisoned(p + 63));
  Tensor again = Tensor::empty({13}, DType::f32);  // the same size takes the block back
  ASSERT_EQ(static_cast<char*>(again.data()), p);
  EXPECT_EQ(__asan_region_is_poisoned(again.data(), 52), nullptr);
  EXPECT_TRUE(__asan_address_is_poisoned(p + 52));
#endif
}

// The VmFlags line of the mapping in /proc/self/smaps that holds `addr` ("" if none).
std::string vm_flags_of(uintptr_t addr) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 && line.find(' ') > line.find('-')) {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(Memory, LargeBlocksStartOnAHugePageAndAskForTransparentHugePages) {
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  Tensor big = Tensor::empty({(3 << 20) + 17}, DType::f32);  // 12 MiB and a bit: not a multiple
  Tensor small = Tensor::empty({1000}, DType::f32);
  const auto at = reinterpret_cast<uintptr_t>(big.data());
  EXPECT_EQ(at % kHugePage, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)";
  // madvise(MADV_HUGEPAGE) marks the mapping "hg" whatever the system's THP mode.
  const std::string flags = vm_flags_of(at);
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the block";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

TEST(Memory, SteadyStateTrainingStepMakesNoHeapAllocation) {
  for (const char* preset : {"fp32", "amp-bf16", "o2-bf16"}) {
    SCOPED_TRACE(preset);
    train::TrainConfig c;
    manual_seed(0);
    train::PrecisionStep step(amp::preset_by_name(preset).value(), nn::make_model(nn::model_spec("cnn").value()), c);
    ImageDataset d = make_synthetic(64, 1, 28, 28, 10, 1);
    DataLoader loader(std::move(d), {.batch_size = 32, .shuffle = false, .prefetch = 0});
    std::vector<Batch> b1{*loader.next()}, b2{*loader.next()};
    step.run(b1);
    step.run(b2);  // warm: every shape seen once, optimizer state created
    const int64_t before = allocation_count();
    step.run(b1);
    EXPECT_EQ(allocation_count(), before);
  }
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

// Under autocast a weight's gradient comes back through the cast of the f32 parameter to
// bf16; that f32 gradient is a gradient, not an activation. With a 1024x1024 weight and a
// batch of 4, activations are a few KiB while the weight gradient is 4 MiB: charged to
// activations it would dominate the activation peak (it made the mlp's amp-bf16 activation
// peak 3.3x fp32's).
TEST(Memory, AutocastWeightGradientIsChargedAsGradient) {
  manual_seed(0);
  nn::Linear layer(1024, 1024);
  Tensor x = Tensor::normal({4, 1024}, 0.0, 1.0);
  reset_peak_memory();
  const int64_t act0 = current_bytes(MemoryCategory::activations);
  const int64_t grad0 = current_bytes(MemoryCategory::gradients);
  {
    amp::AutocastGuard autocast(DType::bf16);
    Tensor y = layer(x);
    sum(y).backward();
  }
  ASSERT_TRUE(layer.weight.grad().defined());
  EXPECT_EQ(layer.weight.grad().dtype(), DType::f32);
  const int64_t weight_grad_bytes = 1024 * 1024 * 4;
  EXPECT_LT(peak_bytes(MemoryCategory::activations) - act0, weight_grad_bytes / 4)
      << "the f32 weight gradient was charged to activations";
  EXPECT_GE(current_bytes(MemoryCategory::gradients) - grad0, weight_grad_bytes);
}

}  // namespace
}  // namespace mixprec
