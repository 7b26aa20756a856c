// onednn_reorder_test.cpp: backend::onednn reorder (dtype and/or memory format) checked
// bit for bit against convert_elements (src/core/convert.h, itself tested against
// hand-made bit patterns) applied in logical order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/kernels.h"
#include "core/convert.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
using test::random_input;

// The raw bytes of t's elements in logical (row-major) order.
std::vector<uint8_t> logical_bytes(const Tensor& t) {
  const size_t es = dtype_size(t.dtype());
  std::vector<uint8_t> out(static_cast<size_t>(t.numel()) * es);
  const Shape& shape = t.shape();
  std::vector<int64_t> idx(shape.size(), 0);
  const uint8_t* base = static_cast<const uint8_t*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * t.strides()[d];
    std::memcpy(out.data() + i * es, base + off * static_cast<int64_t>(es), es);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// What reorder must produce: src's logical elements run through convert_elements.
std::vector<uint8_t> expected_bytes(const Tensor& src, DType dtype) {
  const std::vector<uint8_t> in = logical_bytes(src);
  std::vector<uint8_t> out(static_cast<size_t>(src.numel()) * dtype_size(dtype));
  convert_elements(in.data(), src.dtype(), out.data(), dtype, src.numel());
  return out;
}

void check(const Tensor& src, DType dtype, MemoryFormat format) {
  SCOPED_TRACE(std::string(dtype_name(src.dtype())) + " -> " + dtype_name(dtype) +
               (format == MemoryFormat::channels_last ? " nhwc" : " contiguous"));
  Tensor dst = onednn::reorder(src, dtype, format);
  EXPECT_EQ(dst.dtype(), dtype);
  EXPECT_EQ(dst.shape(), src.shape());
  EXPECT_EQ(dst.suggest_memory_format(), format);
  EXPECT_EQ(logical_bytes(dst), expected_bytes(src, dtype));
}

// Values that exercise rounding: ties to even in bf16/f16, NaN, +-inf, f32 max (overflows
// f16 to inf), f16 subnormals and f32 subnormals, plus random values.
Tensor special_f32(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  const float specials[] = {1.0f + std::ldexp(1.0f, -8),  // bf16 tie -> even (1.0)
                            1.0f + 3 * std::ldexp(1.0f, -8),  // bf16 tie -> even (up)
                            1.0f + std::ldexp(1.0f, -11),  // f16 tie
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::max(), 65520.0f, 65519.0f,
                            std::ldexp(1.0f, -20),  // f16 subnormal
                            std::numeric_limits<float>::denorm_min(), -0.0f};
  uint64_t state = 12345;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i < std::size(specials)) {
      v[i] = specials[i];
    } else {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v[i] = static_cast<float>(static_cast<int64_t>(state >> 11) % 2000001 - 1000000) * 1e-4f;
    }
  }
  return Tensor::from_vector(v, shape);
}

TEST(OneDnnReorder, F32Bf16BothWaysAnyLayout) {
  const Shape s{3, 5, 4, 6};
  Tensor x = special_f32(s);
  for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    check(x, DType::bf16, f);
    check(x.to_memory_format(MemoryFormat::channels_last), DType::bf16, f);
    Tensor b = onednn::reorder(x, DType::bf16, MemoryFormat::contiguous);
    check(b, DType::f32, f);
    check(b, DType::bf16, f);  // pure layout change
  }
}

TEST(OneDnnReorder, F16GoesThroughConvertElements) {
  // oneDNN's f16 reorder is never used (500x slower, limits.md §1.5); results must be
  // bit-identical to convert_elements, layout change or not.
  const Shape s{2, 7, 3, 5};
  Tensor x = special_f32(s);
  Tensor xl = x.to_memory_format(MemoryFormat::channels_last);
  for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    check(x, DType::f16, f);
    check(xl, DType::f16, f);
    Tensor h = onednn::reorder(x, DType::f16, MemoryFormat::contiguous);
    check(h, DType::f32, f);
    check(h, DType::f16, f);
    check(h, DType::bf16, f);
  }
}

TEST(OneDnnReorder, WideAndIntegerDtypesPermuteBytes) {
  Tensor d = random_input({2, 3, 4, 5}, DType::f64, 30);
  check(d, DType::f64, MemoryFormat::channels_last);
  check(d, DType::f32, MemoryFormat::channels_last);
  Tensor i = Tensor::from_vector_i64({1, -2, 3, 1LL << 40, 5, 6}, {1, 2, 3, 1});
  check(i, DType::i64, MemoryFormat::channels_last);
  check(i, DType::f32, MemoryFormat::channels_last);
}

TEST(OneDnnReorder, StridedViewsAndScalars) {
  Tensor base = special_f32({6, 8});
  check(base.as_strided({8, 6}, {1, 8}, 0), DType::bf16, MemoryFormat::contiguous);  // transpose
  check(base.as_strided({3, 4}, {16, 2}, 1), DType::f16, MemoryFormat::contiguous);  // slices
  check(Tensor::scalar(1.5), DType::bf16, MemoryFormat::contiguous);
  EXPECT_EQ(onednn::reorder(Tensor::zeros({0, 3}), DType::bf16, MemoryFormat::contiguous).numel(), 0);
}

TEST(OneDnnReorder, ChannelsLastNeeds4D) {
  const std::string msg = test::error_message(StatusCode::invalid_argument, [] {
    onednn::reorder(Tensor::zeros({2, 3}), DType::f32, MemoryFormat::channels_last);
  });
  EXPECT_NE(msg.find("4-D"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
