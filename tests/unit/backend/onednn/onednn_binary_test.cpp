// onednn_binary_test.cpp: backend::onednn binary ops with broadcasting, against
// hand-computed values and backend::ref in f64; the broadcast cases oneDNN cannot do.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/kernels.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;
namespace ref = backend::ref;
using backend::BinaryOp;
using test::close_to_ref;
using test::f64;
using test::random_input;

const BinaryOp kOps[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul,
                         BinaryOp::div, BinaryOp::max, BinaryOp::min};

TEST(OneDnnBinary, HandComputed) {
  Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector({10, 20}, {2});  // broadcast over rows
  EXPECT_EQ(onednn::binary(BinaryOp::add, a, b).to_vector_f64(),
            (std::vector<double>{11, 22, 13, 24}));
  EXPECT_EQ(onednn::binary(BinaryOp::sub, b, a).to_vector_f64(),  // a broadcast: swapped
            (std::vector<double>{9, 18, 7, 16}));
  EXPECT_EQ(onednn::binary(BinaryOp::max, b, a).to_vector_f64(),
            (std::vector<double>{10, 20, 10, 20}));
}

struct BinaryCase {
  Shape a, b;
};
const BinaryCase kCases[] = {
    {{3, 5, 4}, {3, 5, 4}},  // same shape
    {{3, 5, 4}, {4}},        // b broadcast (bias-like)
    {{3, 5, 4}, {3, 1, 4}},  // b broadcast in the middle
    {{5, 1}, {5, 7}},        // a broadcast: swapped (sub via negation)
    {{}, {2, 3}},            // a 0-d scalar
    {{2, 3}, {}},            // b 0-d scalar
};

TEST(OneDnnBinary, MatchesRef) {
  uint64_t seed = 10;
  for (DType dt : {DType::f32, DType::bf16})
    for (const BinaryCase& c : kCases)
      for (BinaryOp op : kOps) {
        if (op == BinaryOp::div && shape_numel(c.a) < shape_numel(c.b)) continue;  // below
        SCOPED_TRACE(std::string(dtype_name(dt)) + " op " + std::to_string(int(op)) + " a " +
                     shape_str(c.a) + " b " + shape_str(c.b));
        Tensor a = random_input(c.a, dt, ++seed);
        // Divisors away from 0 so the quotient stays O(1).
        Tensor b = random_input(c.b, dt, ++seed, MemoryFormat::contiguous, 0.5, 2.0);
        Tensor d = onednn::binary(op, a, b);
        EXPECT_EQ(d.dtype(), dt);
        // One rounding of an exact f64 result: f32 within 1 ulp (rtol 2^-23), bf16 within
        // half an ulp (rtol 2^-8 leaves 2x margin).
        const test::Tol t = dt == DType::bf16 ? test::Tol{std::ldexp(1.0, -8), 0}
                                              : test::Tol{std::ldexp(1.0, -23), 0};
        EXPECT_TRUE(close_to_ref(d, ref::binary(op, f64(a), f64(b)), t));
      }
}

TEST(OneDnnBinary, ChannelsLastOperandKeepsItsLayout) {
  Tensor a = random_input({2, 8, 3, 3}, DType::f32, 50, MemoryFormat::channels_last);
  Tensor b = random_input({1, 8, 1, 1}, DType::f32, 51);  // per-channel
  Tensor d = onednn::binary(BinaryOp::mul, a, b);
  EXPECT_TRUE(d.is_channels_last());
  EXPECT_TRUE(close_to_ref(d, ref::binary(BinaryOp::mul, f64(a), f64(b)), {std::ldexp(1.0, -23), 0}));
}

TEST(OneDnnBinary, UnsupportedBroadcastsAreUnimplemented) {
  Tensor col = random_input({4, 1}, DType::f32, 60), row = random_input({1, 3}, DType::f32, 61);
  test::error_message(StatusCode::unimplemented,
                      [&] { onednn::binary(BinaryOp::add, col, row); });  // both broadcast
  Tensor full = random_input({4, 3}, DType::f32, 62);
  test::error_message(StatusCode::unimplemented,
                      [&] { onednn::binary(BinaryOp::div, col, full); });  // a broadcast, div
  const std::string msg = test::error_message(StatusCode::invalid_argument, [&] {
    onednn::binary(BinaryOp::add, full, random_input({5}, DType::f32, 63));
  });
  EXPECT_NE(msg.find("not broadcastable"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
