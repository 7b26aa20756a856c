// ref_reorder_test.cpp: backend/ref reorder (dtype rounding checked on bit patterns, memory
// format checked on the raw buffer) and linear_scale.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "backend/kernels.h"
#include "unit/backend/ref_test_util.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
using test::values_near;

float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(RefReorder, F32ToBf16RoundsToNearestEven) {
  // bf16 keeps the top 16 bits of f32. 0x3F808000 is exactly halfway between 0x3F80 and
  // 0x3F81 -> even 0x3F80; 0x3F818000 halfway between 0x3F81 and 0x3F82 -> even 0x3F82;
  // 0x3F808001 is just above halfway -> 0x3F81.
  Tensor src = Tensor::from_vector(
      {f32_from_bits(0x3F808000), f32_from_bits(0x3F818000), f32_from_bits(0x3F808001)}, {3},
      DType::f32);
  Tensor dst = ref::reorder(src, DType::bf16, MemoryFormat::contiguous);
  ASSERT_EQ(dst.dtype(), DType::bf16);
  const uint16_t* bits = dst.data_ptr<uint16_t>();
  EXPECT_EQ(bits[0], 0x3F80);
  EXPECT_EQ(bits[1], 0x3F82);
  EXPECT_EQ(bits[2], 0x3F81);
}

TEST(RefReorder, F32ToF16OverflowsToInf) {
  // 65504 is f16's largest finite (0x7BFF); 65520 is halfway to the next binade and rounds
  // to inf (0x7C00).
  Tensor src = Tensor::from_vector({65504.0f, 65520.0f, -65520.0f}, {3}, DType::f32);
  Tensor dst = ref::reorder(src, DType::f16, MemoryFormat::contiguous);
  const uint16_t* bits = dst.data_ptr<uint16_t>();
  EXPECT_EQ(bits[0], 0x7BFF);
  EXPECT_EQ(bits[1], 0x7C00);
  EXPECT_EQ(bits[2], 0xFC00);
}

TEST(RefReorder, ToChannelsLastPermutesTheBuffer) {
  // Logical [1, 2, 2, 2] = 0..7 (NCHW). NHWC memory interleaves the channels: c0 = 0..3,
  // c1 = 4..7 -> 0 4 1 5 2 6 3 7.
  Tensor src = Tensor::from_vector_f64({0, 1, 2, 3, 4, 5, 6, 7}, {1, 2, 2, 2}, DType::f32);
  Tensor dst = ref::reorder(src, DType::f32, MemoryFormat::channels_last);
  EXPECT_EQ(dst.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(dst.strides(), (Shape{8, 1, 4, 2}));
  EXPECT_TRUE(dst.is_channels_last());
  const float* raw = dst.data_ptr<float>();
  const float expected[] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(raw[i], expected[i]) << "offset " << i;
}

TEST(RefReorder, FromChannelsLastToContiguousBf16) {
  // An NHWC buffer viewed with channels-last strides is logically 0..7 again.
  Tensor buf = Tensor::from_vector_f64({0, 4, 1, 5, 2, 6, 3, 7}, {8}, DType::f32);
  Tensor src = buf.as_strided({1, 2, 2, 2}, {8, 1, 4, 2}, 0);
  Tensor dst = ref::reorder(src, DType::bf16, MemoryFormat::contiguous);
  EXPECT_TRUE(dst.is_contiguous());
  EXPECT_EQ(dst.dtype(), DType::bf16);
  // bf16 bit patterns of 0..7: 0, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0.
  const uint16_t expected[] = {0, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0};
  const uint16_t* raw = dst.data_ptr<uint16_t>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(raw[i], expected[i]) << "offset " << i;
}

TEST(RefReorder, I64StaysExactBeyondDoublePrecision) {
  // 2^53 + 1 has no double representation: a path through double would give 2^53.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor src = Tensor::from_vector_i64({big, -big}, {2});
  Tensor dst = ref::reorder(src, DType::i64, MemoryFormat::contiguous);
  EXPECT_EQ(dst.data_ptr<int64_t>()[0], big);
  EXPECT_EQ(dst.data_ptr<int64_t>()[1], -big);
}

TEST(RefReorder, ChannelsLastNeeds4D) {
  std::string msg = test::invalid_argument_message(
      [] { ref::reorder(Tensor::zeros({2, 3}), DType::f32, MemoryFormat::channels_last); });
  EXPECT_NE(msg.find("reorder: channels_last needs a 4-D src, got [2, 3]"), std::string::npos)
      << msg;
}

TEST(RefLinearScale, AlphaBetaKeepDtype) {
  Tensor src = Tensor::from_vector({1, 2, -3}, {3}, DType::f16);
  Tensor dst = ref::linear_scale(src, 2.0, 1.0);
  EXPECT_EQ(dst.dtype(), DType::f16);
  EXPECT_TRUE(values_near(dst, {3, 5, -5}, 0.0));
  // One rounding at the end: (1 + 2^-11) * 1 + 2^-11 in f16 would round twice if formed in
  // f16 (1 + 2^-11 is a tie -> 1, then again 1); in double it is 1 + 2^-10, exact in f16.
  Tensor one = Tensor::from_vector({1}, {1}, DType::f16);
  EXPECT_TRUE(values_near(ref::linear_scale(one, 1.0 + 1.0 / 2048, 1.0 / 2048), {1 + 1.0 / 1024},
                          0.0));
}

}  // namespace
}  // namespace mixprec
