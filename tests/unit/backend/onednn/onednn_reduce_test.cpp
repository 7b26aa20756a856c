// onednn_reduce_test.cpp: backend::onednn reduce (sum/mean/max/min over axes) against
// hand-computed values and backend::ref in f64.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/kernels.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using backend::ReduceOp;
using test::close_to_ref;
using test::f64;
using test::random_input;

TEST(OneDnnReduce, HandComputed) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(onednn::reduce(ReduceOp::sum, x, {1}, false).to_vector_f64(),
            (std::vector<double>{6, 15}));
  Tensor m = onednn::reduce(ReduceOp::mean, x, {0}, true);
  EXPECT_EQ(m.shape(), (Shape{1, 3}));
  EXPECT_EQ(m.to_vector_f64(), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(onednn::reduce(ReduceOp::max, x, {0, 1}, false).item(), 6.0);
  EXPECT_EQ(onednn::reduce(ReduceOp::min, x, {0, 1}, false).shape(), Shape{});
}

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;
};
const ReduceCase kCases[] = {
    {{8, 33}, {1}},  {{8, 33}, {0}},  {{4, 6, 5}, {0, 2}},
    {{2, 8, 3, 3}, {0, 2, 3}},  // per-channel statistics
    {{300}, {0}},
    // Leading axes of a row-major tensor: the column-sum path (a broadcast operand's gradient).
    {{16, 8, 8}, {0}},  {{3, 4, 5, 6}, {0, 1}},
};

TEST(OneDnnReduce, MatchesRef) {
  uint64_t seed = 10;
  for (DType dt : {DType::f32, DType::bf16})
    for (const ReduceCase& c : kCases)
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min})
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " op " + std::to_string(int(op)) + " " +
                       shape_str(c.shape) + " axes " + shape_str(Shape(c.axes)));
          Tensor x = random_input(c.shape, dt, ++seed);
          Tensor y = onednn::reduce(op, x, c.axes, keepdim);
          EXPECT_EQ(y.dtype(), dt);
          int64_t k = 1;
          for (int64_t a : c.axes) k *= c.shape[a];
          // sum/mean: a reduction of k terms (f32 accumulation inside oneDNN for bf16, one
          // final rounding); max/min select a value: exact.
          const bool selects = op == ReduceOp::max || op == ReduceOp::min;
          const test::Tol t = selects ? test::Tol{0, 0} : test::tol_for(dt, k);
          EXPECT_TRUE(close_to_ref(y, ref::reduce(op, f64(x), c.axes, keepdim), t));
        }
}

TEST(OneDnnReduce, ChannelsLastInputAndEmptyCases) {
  Tensor x = random_input({2, 8, 3, 3}, DType::f32, 50, MemoryFormat::channels_last);
  EXPECT_TRUE(close_to_ref(onednn::reduce(ReduceOp::sum, x, {0, 2, 3}, false),
                           ref::reduce(ReduceOp::sum, f64(x), {0, 2, 3}, false),
                           test::f32_tol(18)));
  // No axes: a copy (numpy's axis=()).
  Tensor same = onednn::reduce(ReduceOp::sum, x, {}, false);
  EXPECT_TRUE(test::same_values(same, x));
  // Empty reduction: sum 0, mean NaN, max an error (backend/ref's semantics).
  Tensor e = Tensor::zeros({3, 0}, DType::f32);
  EXPECT_EQ(onednn::reduce(ReduceOp::sum, e, {1}, false).to_vector_f64(),
            (std::vector<double>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(onednn::reduce(ReduceOp::mean, e, {1}, false).at(0)));
  test::error_message(StatusCode::invalid_argument,
                      [&] { onednn::reduce(ReduceOp::max, e, {1}, false); });
  test::error_message(StatusCode::invalid_argument,
                      [&] { onednn::reduce(ReduceOp::sum, x, {2, 1}, false); });  // unsorted
}

}  // namespace
}  // namespace mixprec
