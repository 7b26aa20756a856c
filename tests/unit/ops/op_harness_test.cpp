// op_harness_test.cpp: one harness for every op in the registry (src/ops/registry.h), as
// ggml's test-backend-ops: an op gets every check below by registering.
// - Forward: f32, bf16, f16 (where the entry supports 16 bits) and f64 against the entry's
//   float64 reference on the same input values, within a tolerance per dtype (about two
//   roundings of the output dtype; accumulation is in f32 or wider everywhere).
// - Output dtype without autocast: the input dtype (f32 for the losses on 16-bit inputs).
// - Gradients: autograd against central finite differences, in f64 (tests/common).
// - Autocast: under bf16 and f16 autocast, with each of the four policies forced on the
//   op's row, the output dtype is the one that policy gives (lower: the autocast dtype;
//   fp32: f32; promote and keep: the input dtype), for f32 and bf16 inputs: an op that
//   consults another row, or none, or casts on its own, fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/autograd_check.h"
#include "common/finite_diff.h"
#include "common/op_inputs.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "ops/registry.h"

namespace mixprec {
namespace {

using registry::OpEntry;

// |out - ref| <= tol * max(|ref|, 1): relative for large values, absolute near zero.
double tolerance(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;
    case DType::f32: return 2e-5;
    case DType::bf16: return 1.6e-2;  // 2^-8 (bf16 has an 8-bit significand): two roundings
    case DType::f16: return 2e-3;     // 2^-11 * 4
    default: return 0.0;
  }
}

// gtest names allow [A-Za-z0-9_]: "matmul.3d" runs as matmul_3d.
std::string param_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = registry::all_ops()[info.param].name;
  for (char& c : name)
    if (c == '.') c = '_';
  return name;
}

class OpHarness : public ::testing::TestWithParam<size_t> {
 protected:
  const OpEntry& op() const { return registry::all_ops()[GetParam()]; }
};

TEST_P(OpHarness, ForwardMatchesReferenceInEveryDtype) {
  const OpEntry& e = op();
  std::vector<DType> dtypes{DType::f64, DType::f32};
  if (e.half) {
    dtypes.push_back(DType::bf16);
    dtypes.push_back(DType::f16);
  }
  for (DType dt : dtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> xs = test::op_inputs(e, dt);
    NoGradGuard ng;
    const Tensor out = e.run(xs);
    const Tensor ref = e.reference(xs);
    ASSERT_EQ(ref.dtype(), DType::f64) << "the reference must be float64";
    ASSERT_EQ(out.shape(), ref.shape());
    ASSERT_GT(out.numel(), 0);
    // Without autocast an op computes in its input dtype (losses: f32 for 16-bit inputs).
    DType want = dt;
    if (e.f32_for_half && is_half(dt)) want = DType::f32;
    if (!e.category && e.name == std::string("cast")) want = DType::f64;
    if (e.name == std::string("argmax")) want = DType::i64;
    EXPECT_EQ(out.dtype(), want) << dtype_name(out.dtype());
    const double tol = tolerance(want == DType::i64 ? dt : want) * e.tolerance;
    const std::vector<double> o = out.to_vector_f64(), r = ref.to_vector_f64();
    int bad = 0;
    for (size_t i = 0; i < o.size() && bad < 5; ++i)
      if (!(std::fabs(o[i] - r[i]) <= tol * std::max(std::fabs(r[i]), 1.0))) {
        ++bad;
        ADD_FAILURE() << e.name << " element " << i << ": " << o[i] << " vs reference " << r[i]
                      << " (tol " << tol << ")";
      }
  }
}

TEST_P(OpHarness, GradientsMatchFiniteDifferencesInF64) {
  const OpEntry& e = op();
  if (!e.differentiable) {
    // Not differentiable (argmax): its output must not carry a graph.
    std::vector<Tensor> xs = test::op_inputs(e, DType::f64);
    for (auto& x : xs) if (is_floating(x.dtype())) x.requires_grad_(true);
    EXPECT_FALSE(e.run(xs).requires_grad());
    return;
  }
  test::check_op(e.name, e.run, test::op_inputs(e, DType::f64));
}

TEST_P(OpHarness, AutocastDtypeFollowsThePolicyTable) {
  const OpEntry& e = op();
  if (!e.category) {
    // Not an autocast op: it runs as asked, autocast or not.
    const std::vector<Tensor> xs = test::op_inputs(e, DType::f32);
    NoGradGuard ng;
    const DType plain = e.run(xs).dtype();
    amp::AutocastGuard ag(DType::bf16);
    EXPECT_EQ(e.run(xs).dtype(), plain);
    return;
  }
  const amp::CastPolicy policies[] = {amp::CastPolicy::lower, amp::CastPolicy::fp32,
                                      amp::CastPolicy::promote, amp::CastPolicy::keep};
  for (DType ac : {DType::bf16, DType::f16})
    for (amp::CastPolicy p : policies)
      for (DType input : {DType::f32, DType::bf16}) {
        if (!e.half && input != DType::f32) continue;
        SCOPED_TRACE(std::string("autocast ") + dtype_name(ac) + ", policy " + amp::policy_name(p) +
                     ", inputs " + dtype_name(input));
        amp::set_policy_override(*e.category, p);
        const std::vector<Tensor> xs = test::op_inputs(e, input);
        DType want = input;
        if (p == amp::CastPolicy::lower) want = ac;
        if (p == amp::CastPolicy::fp32) want = DType::f32;
        if (e.f32_for_half && is_half(want)) want = DType::f32;
        Tensor out;
        {
          NoGradGuard ng;
          amp::AutocastGuard ag(ac);
          out = e.run(xs);
        }
        amp::clear_policy_overrides();
        EXPECT_EQ(out.dtype(), want) << e.name << " gave " << dtype_name(out.dtype());
      }
  // And the table's own row, as `mixprec policy` prints it.
  EXPECT_EQ(amp::policy_for(*e.category), amp::default_policy_for(*e.category));
}

INSTANTIATE_TEST_SUITE_P(Registry, OpHarness,
                         ::testing::Range(size_t(0), registry::all_ops().size()), param_name);

// The registry lists each name once, and every entry can be found by it.
TEST(OpRegistry, NamesAreUnique) {
  ASSERT_GT(registry::all_ops().size(), 30u);
  for (const auto& e : registry::all_ops()) EXPECT_EQ(registry::find_op(e.name), &e) << e.name;
}

}  // namespace
}  // namespace mixprec
