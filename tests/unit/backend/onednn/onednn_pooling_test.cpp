// onednn_pooling_test.cpp: backend::onednn max/avg pooling against hand-computed values and
// backend::ref in f64; workspace contract; layouts; f16.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/kernels.h"
#include "backend/onednn/onednn_stats.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using backend::Pool2dParams;
using test::close_to_ref;
using test::f64;
using test::random_input;
using test::same_values;

Pool2dParams pool(int64_t k, int64_t s, int64_t pad) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  return p;
}

// Distinct small integers (a shuffled -n/2..n/2), exact in bf16 for n <= 256: max pooling
// has no ties, so argmax and gradient routing are unambiguous.
Tensor distinct_input(const Shape& shape, DType dt, uint64_t seed, MemoryFormat f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), -static_cast<float>(v.size() / 2));
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  Tensor t = Tensor::from_vector(v, shape, dt);
  return f == MemoryFormat::contiguous ? t : t.to_memory_format(f);
}

TEST(OneDnnPooling, MaxHandComputed) {
  // 4x4 plane 0..15, 2x2 windows: maxima 5, 7, 13, 15; gradient goes to those cells.
  Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {1, 1, 4, 4});
  backend::PoolResult r = onednn::max_pool2d_forward(x, pool(2, 2, 0));
  EXPECT_EQ(r.dst.to_vector_f64(), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(r.workspace.dtype(), DType::u8);
  EXPECT_EQ(r.workspace.dim(), 1);
  Tensor dd = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor dx = onednn::max_pool2d_backward(dd, r.workspace, x.shape(), pool(2, 2, 0));
  EXPECT_EQ(dx.to_vector_f64(),
            (std::vector<double>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
}

TEST(OneDnnPooling, TieGoesToTheFirstMaximumAsInPyTorch) {
  // Windows [[1,3],[3,0]] and [[2,2],[2,2]]: the gradient goes to the first maximum in
  // row-major window order (PyTorch's rule), in both dtypes and layouts.
  for (DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      Tensor x = Tensor::from_vector({1, 3, 2, 2, 3, 0, 2, 2}, {1, 1, 2, 4}, dt).to_memory_format(f);
      backend::PoolResult r = onednn::max_pool2d_forward(x, pool(2, 2, 0));
      Tensor dd = Tensor::from_vector({1, 1}, {1, 1, 1, 2}, dt);
      Tensor dx = onednn::max_pool2d_backward(dd, r.workspace, x.shape(), pool(2, 2, 0));
      EXPECT_EQ(dx.to_vector_f64(), (std::vector<double>{0, 1, 1, 0, 0, 0, 0, 0}))
          << dtype_name(dt) << (f == MemoryFormat::contiguous ? " nchw" : " nhwc");
    }
}

struct PoolCase {
  Shape src;
  int64_t k, s, pad;
  MemoryFormat format;
};
const PoolCase kCases[] = {
    {{2, 4, 6, 6}, 2, 2, 0, MemoryFormat::channels_last},  // the CNNs' pool
    {{2, 4, 6, 5}, 3, 2, 1, MemoryFormat::contiguous},     // overlap, padding, odd width
    {{1, 16, 5, 3}, 2, 1, 0, MemoryFormat::channels_last},
};

TEST(OneDnnPooling, MaxMatchesRefExactly) {
  // Max pooling selects values and routes gradients: no rounding, so exact in both dtypes.
  uint64_t seed = 10;
  for (DType dt : {DType::f32, DType::bf16})
    for (const PoolCase& c : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " src " + shape_str(c.src));
      const Pool2dParams p = pool(c.k, c.s, c.pad);
      Tensor x = distinct_input(c.src, dt, ++seed, c.format);
      backend::PoolResult r = onednn::max_pool2d_forward(x, p);
      EXPECT_EQ(r.dst.dtype(), dt);
      EXPECT_EQ(r.dst.suggest_memory_format(), c.format);
      backend::PoolResult rr = ref::max_pool2d_forward(f64(x), p);
      EXPECT_TRUE(same_values(r.dst, rr.dst));
      // diff_dst in the other layout than forward's dst: reordered to the workspace's.
      const MemoryFormat other = c.format == MemoryFormat::contiguous
                                     ? MemoryFormat::channels_last : MemoryFormat::contiguous;
      // Small integer gradients: sums of overlapping windows stay exact in bf16.
      Tensor dd = Tensor::from_vector_f64(
                      [&] {
                        std::vector<double> v(static_cast<size_t>(r.dst.numel()));
                        for (size_t i = 0; i < v.size(); ++i) v[i] = double(i % 7) - 3;
                        return v;
                      }(),
                      r.dst.shape(), dt)
                      .to_memory_format(other);
      Tensor dx = onednn::max_pool2d_backward(dd, r.workspace, c.src, p);
      EXPECT_EQ(dx.dtype(), dt);
      EXPECT_TRUE(same_values(dx, ref::max_pool2d_backward(f64(dd), rr.workspace, c.src, p)));
    }
}

TEST(OneDnnPooling, AvgMatchesRef) {
  uint64_t seed = 50;
  for (DType dt : {DType::f32, DType::bf16})
    for (const PoolCase& c : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " src " + shape_str(c.src));
      const Pool2dParams p = pool(c.k, c.s, c.pad);
      Tensor x = random_input(c.src, dt, ++seed, c.format);
      Tensor y = onednn::avg_pool2d_forward(x, p);
      const int64_t k = c.k * c.k;  // a mean of k*k terms (count_include_pad)
      EXPECT_TRUE(close_to_ref(y, ref::avg_pool2d_forward(f64(x), p), test::tol_for(dt, k)));
      Tensor dd = random_input(y.shape(), dt, ++seed, c.format);
      Tensor dx = onednn::avg_pool2d_backward(dd, c.src, p);
      EXPECT_TRUE(close_to_ref(dx, ref::avg_pool2d_backward(f64(dd), c.src, p),
                               test::tol_for(dt, k)));
    }
}

TEST(OneDnnPooling, SameShapeInTwoLayoutsKeepsEachWorkspaceRight) {
  // Two forwards of the same shape, nchw then nhwc, then both backwards in reverse order:
  // each workspace carries its own layout, so neither gradient is routed wrongly.
  const Shape s{2, 16, 4, 4};
  Tensor a = distinct_input(s, DType::f32, 60, MemoryFormat::contiguous);
  Tensor b = distinct_input(s, DType::f32, 61, MemoryFormat::channels_last);
  backend::PoolResult ra = onednn::max_pool2d_forward(a, pool(2, 2, 0));
  backend::PoolResult rb = onednn::max_pool2d_forward(b, pool(2, 2, 0));
  Tensor dd = random_input({2, 16, 2, 2}, DType::f32, 62);
  Tensor gb = onednn::max_pool2d_backward(dd, rb.workspace, s, pool(2, 2, 0));
  Tensor ga = onednn::max_pool2d_backward(dd, ra.workspace, s, pool(2, 2, 0));
  EXPECT_TRUE(same_values(ga, ref::max_pool2d_backward(
                                  f64(dd), ref::max_pool2d_forward(f64(a), pool(2, 2, 0)).workspace,
                                  s, pool(2, 2, 0))));
  EXPECT_TRUE(same_values(gb, ref::max_pool2d_backward(
                                  f64(dd), ref::max_pool2d_forward(f64(b), pool(2, 2, 0)).workspace,
                                  s, pool(2, 2, 0))));
}

TEST(OneDnnPooling, WrongWorkspaceIsRejected) {
  Tensor x = random_input({1, 2, 4, 4}, DType::f32, 70);
  backend::PoolResult r = onednn::max_pool2d_forward(x, pool(2, 2, 0));
  Tensor dd = random_input(r.dst.shape(), DType::f32, 71);
  const std::string msg = test::error_message(StatusCode::invalid_argument, [&] {
    onednn::max_pool2d_backward(dd, Tensor::zeros({3}, DType::u8), x.shape(), pool(2, 2, 0));
  });
  EXPECT_NE(msg.find("workspace"), std::string::npos) << msg;
  test::error_message(StatusCode::invalid_argument, [&] {  // ref's i64 workspace
    onednn::max_pool2d_backward(dd, ref::max_pool2d_forward(f64(x), pool(2, 2, 0)).workspace,
                                x.shape(), pool(2, 2, 0));
  });
  test::error_message(StatusCode::invalid_argument, [&] {  // bad trailing format byte
    onednn::max_pool2d_backward(dd, Tensor::full({r.workspace.numel()}, 7, DType::u8), x.shape(),
                                pool(2, 2, 0));
  });
}

TEST(OneDnnPooling, SteadyStateCreatesNothing) {
  Tensor x = random_input({2, 8, 8, 8}, DType::bf16, 80, MemoryFormat::channels_last);
  Tensor dd = random_input({2, 8, 4, 4}, DType::bf16, 81, MemoryFormat::channels_last);
  auto step = [&] {
    backend::PoolResult r = onednn::max_pool2d_forward(x, pool(2, 2, 0));
    onednn::max_pool2d_backward(dd, r.workspace, x.shape(), pool(2, 2, 0));
  };
  step();
  const int64_t created = onednn::onednn_primitive_creations();
  step();
  EXPECT_EQ(onednn::onednn_primitive_creations(), created);
}

TEST(OneDnnPooling, F16IsEmulatedInF32) {
  // Values are checked in onednn_half_emulation_test.cpp; here only the dtype of the result.
  EXPECT_EQ(onednn::max_pool2d_forward(Tensor::zeros({1, 1, 4, 4}, DType::f16), pool(2, 2, 0))
                .dst.dtype(),
            DType::f16);
}

}  // namespace
}  // namespace mixprec
