// op_shapes_test.cpp: mixprec's ops against PyTorch 1.13 on good and bad operand shapes
// (tests/golden/data/op_shapes_torch113.json, written by tests/golden/gen_op_shapes.py):
// the same output shape where PyTorch runs, a mixprec::Error naming the op where PyTorch
// raises. Plus the semantics a shape table cannot show: beta == 0 ignores NaN in input,
// default beta and alpha, chain_matmul's order.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "mixprec/amp.h"
#include "mixprec/autograd.h"
#include "mixprec/ops.h"

namespace mixprec {
namespace {

using Args = const std::vector<Tensor>&;
using Kw = const nlohmann::json&;

double kw(Kw k, const char* name, double fallback) { return k.contains(name) ? k.at(name).get<double>() : fallback; }

// The golden's op names, called with its keyword arguments.
const std::map<std::string, std::function<Tensor(Args, Kw)>>& ops() {
  static const std::map<std::string, std::function<Tensor(Args, Kw)>> m = {
      {"mm", [](Args x, Kw) { return mm(x.at(0), x.at(1)); }},
      {"mv", [](Args x, Kw) { return mv(x.at(0), x.at(1)); }},
      {"addmm", [](Args x, Kw k) { return addmm(x.at(0), x.at(1), x.at(2), kw(k, "beta", 1), kw(k, "alpha", 1)); }},
      {"addmv", [](Args x, Kw k) { return addmv(x.at(0), x.at(1), x.at(2), kw(k, "beta", 1), kw(k, "alpha", 1)); }},
      {"addr", [](Args x, Kw k) { return addr(x.at(0), x.at(1), x.at(2), kw(k, "beta", 1), kw(k, "alpha", 1)); }},
      {"baddbmm",
       [](Args x, Kw k) { return baddbmm(x.at(0), x.at(1), x.at(2), kw(k, "beta", 1), kw(k, "alpha", 1)); }},
      {"addbmm", [](Args x, Kw k) { return addbmm(x.at(0), x.at(1), x.at(2), kw(k, "beta", 1), kw(k, "alpha", 1)); }},
      {"chain_matmul", [](Args x, Kw) { return chain_matmul(x); }},
  };
  return m;
}

TEST(OpShapes, AsPyTorch) {
  std::ifstream f(std::string(MIXPREC_SOURCE_DIR) + "/tests/golden/data/op_shapes_torch113.json");
  ASSERT_TRUE(f.good()) << "run /usr/bin/python3 tests/golden/gen_op_shapes.py";
  const nlohmann::json golden = nlohmann::json::parse(f);
  ASSERT_EQ(golden.at("torch_version").get<std::string>().rfind("1.13", 0), 0u);
  int checked = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string op = c.at("op");
    SCOPED_TRACE(op + " " + c.at("shapes").dump() + " " + c.at("kwargs").dump() + ": PyTorch " + c.at("torch").dump());
    ASSERT_TRUE(ops().count(op)) << "no call for this op in op_shapes_test.cpp";
    std::vector<Tensor> xs;
    for (const auto& s : c.at("shapes")) xs.push_back(Tensor::uniform(s.get<Shape>(), -1.0, 1.0));
    std::string error;
    Tensor out;
    try {
      out = ops().at(op)(xs, c.at("kwargs"));
    } catch (const Error& e) {
      error = e.what();
    }
    if (c.at("torch").is_string()) {
      EXPECT_NE(error, "") << "PyTorch raises, mixprec returned " << out.str();
      EXPECT_NE(error.find(op), std::string::npos) << "the message should name the op: " << error;
    } else {
      ASSERT_EQ(error, "");
      EXPECT_EQ(out.shape(), c.at("torch").get<Shape>());
    }
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

std::vector<double> values(const Tensor& t) { return t.to_vector_f64(); }

TEST(Blas, BetaZeroIgnoresNanInInputAndDefaultsAreOne) {
  const Tensor a = Tensor::uniform({4, 6}, -1, 1), b = Tensor::uniform({6, 3}, -1, 1);
  const Tensor nan = Tensor::full({4, 3}, std::nan(""));
  for (double v : values(addmm(nan, a, b, 0.0, 1.0))) EXPECT_FALSE(std::isnan(v));
  const Tensor v6 = Tensor::uniform({6}, -1, 1);
  for (double v : values(addmv(Tensor::full({4}, std::nan("")), a, v6, 0.0))) EXPECT_FALSE(std::isnan(v));
  // beta = alpha = 1 by default: input + product, as mm's result plus input.
  const Tensor input = Tensor::uniform({4, 3}, -1, 1);
  const std::vector<double> got = values(addmm(input, a, b)), p = values(mm(a, b)), i = values(input);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], i[k] + p[k], 1e-6);
  // beta and alpha scale their terms.
  const std::vector<double> s = values(addmm(input, a, b, 0.5, -2.0));
  for (size_t k = 0; k < s.size(); ++k) EXPECT_NEAR(s[k], 0.5 * i[k] - 2.0 * p[k], 1e-6);
}

TEST(Blas, DtypeMismatchIsAnErrorOutsideAutocastAndCastUnderIt) {
  const Tensor a = Tensor::uniform({4, 6}, -1, 1), b = Tensor::uniform({6, 3}, -1, 1).to(DType::bf16);
  EXPECT_THROW(mm(a, b), Error);
  EXPECT_THROW(addmm(Tensor::zeros({4, 3}, DType::bf16), a, a.to(DType::f32).reshape({6, 4}).detach()), Error);
  amp::AutocastGuard g(DType::bf16);
  EXPECT_EQ(mm(a, b).dtype(), DType::bf16);
}

// chain_matmul's order is PyTorch's (multi_dot's): in bf16, where the order shows in the
// bits, [2, 8] x [8, 8] x [8, 1] is A(BC) (PyTorch's costs: (AB)C 2*8*(8+1) = 144 > A(BC)
// 8*1*(2+8) = 80) and [2, 8] x [8, 8] x [8, 8] is (AB)C (256 < 640).
TEST(Blas, ChainMatmulMultipliesInTheCheapestOrder) {
  manual_seed(5);
  auto bf = [](Shape s) { return Tensor::uniform(s, -1, 1).to(DType::bf16); };
  auto same = [](const Tensor& x, const Tensor& y) {
    return std::memcmp(x.contiguous().data(), y.contiguous().data(), size_t(x.numel()) * 2) == 0;
  };
  const Tensor a = bf({2, 8}), b = bf({8, 8}), c = bf({8, 1});
  EXPECT_TRUE(same(chain_matmul({a, b, c}), mm(a, mm(b, c))));
  const Tensor d = bf({2, 8}), e = bf({8, 8}), f = bf({8, 8});
  EXPECT_TRUE(same(chain_matmul({d, e, f}), mm(mm(d, e), f)));
}

// addbmm sums the batch inside one GEMM: its result is the exact sum rounded once. Values
// j/16 make every product and sum exact in f32 while the per-batch sums need more than
// bf16's 8 bits, so rounding each batch's product first would show.
TEST(Blas, AddbmmRoundsOnce) {
  auto sixteenths = [](Shape s, int seed) {
    std::vector<double> v(size_t(shape_numel(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t((i * 7 + size_t(seed)) % 33) - 16) / 16.0;
    return Tensor::from_vector_f64(v, s, DType::bf16);
  };
  const Tensor b1 = sixteenths({3, 4, 5}, 1), b2 = sixteenths({3, 5, 2}, 4);
  const Tensor zero = Tensor::zeros({4, 2}, DType::bf16);
  const Tensor got = addbmm(zero, b1, b2, 0.0, 1.0);
  const Tensor exact = addbmm(zero.to(DType::f64), b1.to(DType::f64), b2.to(DType::f64), 0.0, 1.0).to(DType::bf16);
  EXPECT_EQ(values(got), values(exact));
}

}  // namespace
}  // namespace mixprec
