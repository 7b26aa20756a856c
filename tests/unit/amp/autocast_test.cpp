// autocast_test.cpp: the autocast mode: per-op output dtypes from the policy table,
// bit-identity with manual casts, nesting, exceptions, the weight-cast cache and
// per-module overrides.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <cmath>
#include <functional>
#include <thread>

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/nn.h"
#include "mixprec/ops/ops.h"
#include "mixprec/optim/optim.h"
#include "mixprec/core/status.h"

namespace mixprec::amp {
namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  manual_seed(seed);
  return Tensor::uniform(s, -1.0, 1.0, dt);
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data(), cb.data(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

struct OpCase {
  const char* name;
  OpId op;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<Tensor> inputs;  // f32
};

std::vector<OpCase> cases() {
  const Tensor target = Tensor::from_vector_i64({1, 0, 3, 2}, {4});
  return {
      {"conv2d", OpId::conv2d, [](auto& x) { return conv2d(x[0], x[1], x[2], 1, 1); },
       {rnd({2, 3, 6, 6}, 1), rnd({4, 3, 3, 3}, 2), rnd({4}, 3)}},
      {"linear", OpId::linear, [](auto& x) { return linear(x[0], x[1], x[2]); },
       {rnd({4, 8}, 4), rnd({5, 8}, 5), rnd({5}, 6)}},
      {"matmul", OpId::matmul, [](auto& x) { return matmul(x[0], x[1]); }, {rnd({4, 8}, 7), rnd({8, 3}, 8)}},
      {"bmm", OpId::bmm, [](auto& x) { return matmul(x[0], x[1]); }, {rnd({2, 4, 8}, 9), rnd({2, 8, 3}, 10)}},
      {"softmax", OpId::softmax, [](auto& x) { return softmax(x[0], 1); }, {rnd({4, 5}, 11)}},
      {"log_softmax", OpId::log_softmax, [](auto& x) { return log_softmax(x[0], 1); }, {rnd({4, 5}, 12)}},
      {"exp", OpId::exp, [](auto& x) { return exp(x[0]); }, {rnd({7}, 13)}},
      {"log", OpId::log, [](auto& x) { return log(add(mul(x[0], x[0]), 1.0)); }, {rnd({7}, 14)}},
      {"sum", OpId::sum, [](auto& x) { return sum(x[0], {1}); }, {rnd({3, 4}, 15)}},
      {"mean", OpId::mean, [](auto& x) { return mean(x[0]); }, {rnd({3, 4}, 16)}},
      {"cross_entropy", OpId::cross_entropy, [=](auto& x) { return cross_entropy(x[0], target); },
       {rnd({4, 5}, 17)}},
      {"mse_loss", OpId::mse_loss, [](auto& x) { return mse_loss(x[0], x[1]); }, {rnd({4, 5}, 18), rnd({4, 5}, 19)}},
      {"add", OpId::add, [](auto& x) { return add(x[0], x[1]); }, {rnd({4, 5}, 20), rnd({4, 5}, 21)}},
      {"mul", OpId::mul, [](auto& x) { return mul(x[0], x[1]); }, {rnd({4, 5}, 22), rnd({5}, 23)}},
      {"relu", OpId::relu, [](auto& x) { return relu(x[0]); }, {rnd({4, 5}, 24)}},
      {"max_pool2d", OpId::max_pool2d, [](auto& x) { return max_pool2d(x[0], 2); }, {rnd({1, 2, 4, 4}, 25)}},
      {"flatten", OpId::flatten, [](auto& x) { return flatten(x[0], 1); }, {rnd({2, 3, 2, 2}, 26)}},
  };
}

// The dtype autocast gives op's output for f32 inputs (a table lookup done by hand here).
DType expected_output(CastPolicy p, DType autocast) {
  return p == CastPolicy::lower ? autocast : DType::f32;
}

class AutocastOps : public ::testing::TestWithParam<DType> {};

TEST_P(AutocastOps, OutputDtypeFollowsTableAndEqualsManualCast) {
  const DType ac = GetParam();
  for (const OpCase& c : cases()) {
    SCOPED_TRACE(c.name);
    Tensor under;
    {
      AutocastGuard g(ac);
      under = c.fn(c.inputs);
    }
    const CastPolicy p = policy_for(c.op);
    // Losses and reductions come out f32 under the fp32 policy; lower ops in the autocast
    // dtype; promote/keep ops of f32 inputs stay f32.
    EXPECT_EQ(under.dtype(), expected_output(p, ac)) << policy_name(p);
    // The same op on inputs cast by hand, autocast off: bit-identical.
    std::vector<Tensor> manual;
    for (const Tensor& x : c.inputs) manual.push_back(p == CastPolicy::lower ? x.to(ac) : x);
    EXPECT_TRUE(bit_identical(under, c.fn(manual)));
  }
}

TEST_P(AutocastOps, Fp32OpsLiftHalfInputsAndKeepOpsPreserveThem) {
  const DType ac = GetParam();
  const Tensor h = rnd({4, 5}, 30).to(ac);
  AutocastGuard g(ac);
  EXPECT_EQ(softmax(h, 1).dtype(), DType::f32);
  EXPECT_EQ(sum(h).dtype(), DType::f32);
  EXPECT_EQ(relu(h).dtype(), ac);
  EXPECT_EQ(add(h, rnd({4, 5}, 31)).dtype(), DType::f32);  // promote: widest wins
  EXPECT_EQ(add(h, h).dtype(), ac);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AutocastOps, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Autocast, F64AndIntegerTensorsAreNeverCast) {
  AutocastGuard g(DType::bf16);
  const Tensor a = rnd({3, 4}, 40, DType::f64), b = rnd({4, 2}, 41, DType::f64);
  EXPECT_EQ(matmul(a, b).dtype(), DType::f64);
  EXPECT_EQ(softmax(a, 1).dtype(), DType::f64);
}

TEST(Autocast, NestsAndRestoresIncludingDisabledRegions) {
  EXPECT_FALSE(is_autocast_enabled());
  {
    AutocastGuard outer(DType::bf16);
    EXPECT_TRUE(is_autocast_enabled());
    {
      AutocastGuard off(false);
      EXPECT_FALSE(is_autocast_enabled());
      EXPECT_EQ(linear(rnd({2, 3}, 42), rnd({4, 3}, 43)).dtype(), DType::f32);
      {
        AutocastGuard inner(DType::f16);
        EXPECT_EQ(autocast_dtype(), DType::f16);
      }
      EXPECT_FALSE(is_autocast_enabled());
    }
    EXPECT_TRUE(is_autocast_enabled());
    EXPECT_EQ(autocast_dtype(), DType::bf16);
  }
  EXPECT_FALSE(is_autocast_enabled());
}

TEST(Autocast, StateIsRestoredWhenAnExceptionLeavesTheRegion) {
  try {
    AutocastGuard g(DType::bf16);
    linear(rnd({2, 3}, 44), rnd({4, 5}, 45));  // shape error
    FAIL();
  } catch (const Error&) {
  }
  EXPECT_FALSE(is_autocast_enabled());
  EXPECT_EQ(cast_cache_stats().entries, 0);
}

TEST(Autocast, StateIsThreadLocal) {
  AutocastGuard g(DType::bf16);
  bool other_thread_enabled = true;
  std::thread t([&] { other_thread_enabled = is_autocast_enabled(); });
  t.join();
  EXPECT_FALSE(other_thread_enabled);
}

TEST(Autocast, InvalidDtypeIsRejected) {
  EXPECT_THROW(AutocastGuard(DType::f32), Error);
}

TEST(AutocastCache, EachParameterIsCastOncePerRegion) {
  nn::Linear layer(8, 4);
  const Tensor x = rnd({2, 8}, 50);
  reset_cast_cache_stats();
  {
    AutocastGuard g(DType::bf16);
    for (int i = 0; i < 5; ++i) layer(x);
    // weight and bias: 2 casts; the 4 later forwards hit the cache twice each.
    EXPECT_EQ(cast_cache_stats().casts, 2);
    EXPECT_EQ(cast_cache_stats().hits, 8);
    EXPECT_EQ(cast_cache_stats().entries, 2);
  }
  EXPECT_EQ(cast_cache_stats().entries, 0);  // cleared on leaving the outermost region
}

TEST(AutocastCache, NotReusedAfterAnOptimizerStep) {
  nn::Linear layer(8, 4);
  optim::SGD opt(layer.parameters(), {.lr = 0.5});
  const Tensor x = rnd({2, 8}, 51);
  AutocastGuard g(DType::bf16);
  reset_cast_cache_stats();
  Tensor before = layer(x);
  sum(before).backward();
  opt.step();  // weights change in place
  Tensor after = layer(x);
  EXPECT_EQ(cast_cache_stats().casts, 4);  // both parameters cast again
  // And the new output really uses the new weights.
  AutocastGuard off(false);
  Tensor expect = linear(x.to(DType::bf16), layer.weight.to(DType::bf16), layer.bias.to(DType::bf16));
  EXPECT_TRUE(bit_identical(after, expect));
}

TEST(AutocastCache, OfferedCopyServesUntilTheParameterChanges) {
  // An offered copy holding a *different* value than cast(weight) shows which one a forward
  // used: the offer while the weight is unchanged, a fresh cast once its version moves.
  nn::Linear layer(8, 4, /*bias=*/false);
  const Tensor x = rnd({2, 8}, 57);
  Tensor marker = Tensor::full({4, 8}, 0.5, DType::bf16);
  offer_cast(layer.weight, marker);
  reset_cast_cache_stats();
  Tensor y;
  {
    AutocastGuard g(DType::bf16);
    y = layer(x);
  }
  EXPECT_EQ(cast_cache_stats().prepared, 1);
  EXPECT_EQ(cast_cache_stats().casts, 0);
  {
    AutocastGuard off(false);
    EXPECT_TRUE(bit_identical(y, linear(x.to(DType::bf16), marker, Tensor())));
  }
  // The gradient still reaches the f32 parameter through the offered copy.
  sum(y).backward();
  ASSERT_TRUE(layer.weight.grad().defined());
  EXPECT_EQ(layer.weight.grad().dtype(), DType::f32);
  // Changed in place (version bump): the offer is stale and the weight is cast again.
  {
    NoGradGuard ng;
    layer.weight.fill_(0.25);  // bumps the storage version, as an optimizer step does
  }
  reset_cast_cache_stats();
  {
    AutocastGuard g(DType::bf16);
    layer(x);
  }
  EXPECT_EQ(cast_cache_stats().prepared, 0);
  EXPECT_EQ(cast_cache_stats().casts, 1);
  withdraw_offered_cast(layer.weight);
  EXPECT_THROW(offer_cast(layer.weight, Tensor::zeros({4, 7}, DType::bf16)), Error);  // wrong shape
  EXPECT_THROW(offer_cast(marker, marker), Error);                                     // not f32
}

TEST(AutocastCache, DisabledCacheCastsEveryTime) {
  nn::Linear layer(8, 4);
  const Tensor x = rnd({2, 8}, 52);
  reset_cast_cache_stats();
  AutocastGuard g(DType::bf16, true, /*cache_enabled=*/false);
  layer(x);
  layer(x);
  EXPECT_EQ(cast_cache_stats().casts, 0);
  EXPECT_EQ(cast_cache_stats().hits, 0);
}

// Two forwards and backwards inside one autocast region (gradient accumulation written
// with the region around the loop): the second runs through the weight's cached cast again,
// as PyTorch's does, and the gradients add up to those of two separate regions.
TEST(AutocastBackward, SecondBackwardThroughTheCachedCastInOneRegion) {
  nn::Linear a(8, 4), b(8, 4);
  {
    NoGradGuard ng;
    b.weight.copy_(a.weight);
    b.bias.copy_(a.bias);
  }
  const Tensor x1 = rnd({3, 8}, 61), x2 = rnd({3, 8}, 62);
  {
    AutocastGuard g(DType::bf16);
    sum(a(x1)).backward();
    sum(a(x2)).backward();  // threw "backward through the graph a second time" before
  }
  for (const Tensor& x : {x1, x2}) {
    AutocastGuard g(DType::bf16);
    sum(b(x)).backward();
  }
  EXPECT_TRUE(bit_identical(a.weight.grad(), b.weight.grad()));
  EXPECT_TRUE(bit_identical(a.bias.grad(), b.bias.grad()));
  // A non-leaf's graph is still freed by its backward: running it twice stays an error.
  Tensor y;
  {
    AutocastGuard g(DType::bf16);
    y = sum(a(x1));
  }
  y.backward();
  EXPECT_THROW(y.backward(), Error);
}

TEST(AutocastBackward, GradientReachingF32LeafIsF32) {
  nn::Linear layer(8, 4);
  const Tensor x = rnd({2, 8}, 53);
  Tensor loss;
  {
    AutocastGuard g(DType::bf16);
    Tensor y = layer(x);
    EXPECT_EQ(y.dtype(), DType::bf16);
    loss = cross_entropy(y, Tensor::from_vector_i64({1, 3}, {2}));
    EXPECT_EQ(loss.dtype(), DType::f32);
  }
  loss.backward();
  EXPECT_EQ(layer.weight.grad().dtype(), DType::f32);
  EXPECT_EQ(layer.bias.grad().dtype(), DType::f32);
}

TEST(AutocastBackward, WeightGradientKeepsTheF32Accumulation) {
  // x and the upstream gradient g are exact in bf16, so the bf16 product's weight gradient
  // g^T x is exactly known in double. It must reach the f32 parameter as oneDNN's f32
  // accumulation (f32 rounding), not rounded to bf16 on the way (PyTorch rounds: docs/amp.md).
  nn::Linear layer(64, 4, /*bias=*/false);
  const Tensor x = rnd({16, 64}, 55).to(DType::bf16).to(DType::f32);
  const Tensor g = rnd({16, 4}, 56).to(DType::bf16).to(DType::f32);
  Tensor loss;
  {
    AutocastGuard guard(DType::bf16);
    loss = sum(mul(layer(x), g));  // promote: d loss / d y = g, cast to y's bf16 exactly
  }
  loss.backward();
  ASSERT_EQ(layer.weight.grad().dtype(), DType::f32);
  const auto xv = x.to_vector_f64(), gv = g.to_vector_f64(), dw = layer.weight.grad().to_vector_f64();
  int off_bf16_grid = 0;
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t k = 0; k < 64; ++k) {
      double want = 0, mag = 0;
      for (int64_t n = 0; n < 16; ++n) {
        want += gv[size_t(n * 4 + o)] * xv[size_t(n * 64 + k)];
        mag += std::fabs(gv[size_t(n * 4 + o)] * xv[size_t(n * 64 + k)]);
      }
      const double got = dw[size_t(o * 64 + k)];
      EXPECT_NEAR(got, want, 16 * 0x1p-24 * mag) << "o " << o << " k " << k;  // f32 sums
      const float f = float(got);
      off_bf16_grid += (std::bit_cast<uint32_t>(f) & 0xffffu) != 0;
    }
  EXPECT_GT(off_bf16_grid, 128);  // most values carry more than bf16's 8 bits
}

TEST(AutocastBackward, MatchesFp32WithinBf16Tolerance) {
  // Same layer, same data: the bf16 gradient agrees with the f32 one within bf16's
  // precision (2^-8 relative per input, summed over K = 64 products: 3% of the max).
  manual_seed(9);
  nn::Linear layer(64, 16);
  const Tensor x = rnd({32, 64}, 54);
  const Tensor t = Tensor::from_vector_i64(std::vector<int64_t>(32, 3), {32});
  cross_entropy(layer(x), t).backward();
  const auto g32 = layer.weight.grad().to_vector();
  layer.zero_grad();
  Tensor loss;
  {
    AutocastGuard g(DType::bf16);
    loss = cross_entropy(layer(x), t);
  }
  loss.backward();
  const auto g16 = layer.weight.grad().to_vector();
  float mx = 0;
  for (float v : g32) mx = std::max(mx, std::fabs(v));
  for (size_t i = 0; i < g32.size(); ++i) EXPECT_NEAR(g16[i], g32[i], 0.03f * mx) << i;
}

TEST(AutocastModule, ModuleOverrideRunsOneLayerInF32) {
  nn::Sequential net({std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Linear>(8, 4)});
  net.children()[1].second->set_autocast(false);
  AutocastGuard g(DType::bf16);
  Tensor y = net(rnd({2, 8}, 55));
  EXPECT_EQ(y.dtype(), DType::f32);  // the last layer ran with autocast off
  net.children()[1].second->set_autocast(std::nullopt);
  EXPECT_EQ(net(rnd({2, 8}, 56)).dtype(), DType::bf16);
}

TEST(AutocastPolicy, OverridesChangeAnOpsPolicy) {
  set_policy_override(OpId::softmax, CastPolicy::keep);
  {
    AutocastGuard g(DType::bf16);
    EXPECT_EQ(softmax(rnd({2, 3}, 57).to(DType::bf16), 1).dtype(), DType::bf16);
  }
  clear_policy_overrides();
  EXPECT_EQ(policy_for(OpId::softmax), CastPolicy::fp32);
}

TEST(AutocastPolicy, TableHasEveryOpAndPrints) {
  const std::string table = policy_table_string();
  for (int i = 0; i < int(OpId::count); ++i) {
    const char* name = op_name(OpId(i));
    EXPECT_NE(table.find(name), std::string::npos) << name;
    EXPECT_EQ(parse_op(name), OpId(i));
  }
  EXPECT_EQ(default_policy_for(OpId::conv2d), CastPolicy::lower);
  EXPECT_EQ(default_policy_for(OpId::layer_norm), CastPolicy::fp32);
  EXPECT_EQ(default_policy_for(OpId::cat), CastPolicy::promote);
  EXPECT_EQ(default_policy_for(OpId::relu), CastPolicy::keep);
}

}  // namespace
}  // namespace mixprec::amp
