// op_shapes_test.cpp: mixprec's ops against PyTorch 1.13 on good and bad operand shapes
// (tests/golden/data/op_shapes_torch113.json, written by tests/golden/gen_op_shapes.py):
// where PyTorch runs, the same output shape, values and input gradients (f32, within a few
// ulp of the sums' size); where PyTorch raises, a mixprec::Error naming the op. New ops add their cases to the generator and their call to ops() below.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

using Args = const std::vector<Tensor>&;
using Kw = const nlohmann::json&;

double kw(Kw k, const char* name, double fallback) { return k.contains(name) ? k.at(name).get<double>() : fallback; }
int64_t ik(Kw k, const char* name, int64_t fallback) { return k.contains(name) ? k.at(name).get<int64_t>() : fallback; }
Tensor opt(Args x, size_t i) { return x.size() > i ? x[i] : Tensor(); }

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
      {"prelu", [](Args x, Kw) { return prelu(x.at(0), x.at(1)); }},
      {"conv1d", [](Args x, Kw k) {
         return conv1d(x.at(0), x.at(1), opt(x, 2), ik(k, "stride", 1), ik(k, "padding", 0), ik(k, "dilation", 1),
                       ik(k, "groups", 1));
       }},
      {"conv2d", [](Args x, Kw k) {
         return conv2d(x.at(0), x.at(1), opt(x, 2), ik(k, "stride", 1), ik(k, "padding", 0), ik(k, "dilation", 1),
                       ik(k, "groups", 1));
       }},
      {"conv3d", [](Args x, Kw k) {
         return conv3d(x.at(0), x.at(1), opt(x, 2), ik(k, "stride", 1), ik(k, "padding", 0), ik(k, "dilation", 1),
                       ik(k, "groups", 1));
       }},
      {"conv_transpose1d", [](Args x, Kw k) {
         return conv_transpose1d(x.at(0), x.at(1), opt(x, 2), ik(k, "stride", 1), ik(k, "padding", 0),
                                 ik(k, "output_padding", 0), ik(k, "groups", 1), ik(k, "dilation", 1));
       }},
      {"conv_transpose2d", [](Args x, Kw k) {
         return conv_transpose2d(x.at(0), x.at(1), opt(x, 2), ik(k, "stride", 1), ik(k, "padding", 0),
                                 ik(k, "output_padding", 0), ik(k, "groups", 1), ik(k, "dilation", 1));
       }},
      {"conv_transpose3d", [](Args x, Kw k) {
         return conv_transpose3d(x.at(0), x.at(1), opt(x, 2), ik(k, "stride", 1), ik(k, "padding", 0),
                                 ik(k, "output_padding", 0), ik(k, "groups", 1), ik(k, "dilation", 1));
       }},
  };
  return m;
}

// The generator's operand k (see gen_op_shapes.py) and loss weights r.
Tensor operand(size_t k, const Shape& shape) {
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float(double(int64_t((i * 7919 + k * 104729 + 13) % 2001) - 1000) / 1000.0);
  return Tensor::from_vector(v, shape);
}

Tensor loss_weights(const Shape& shape) {
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(double(int64_t((i * 31 + 7) % 17) - 8) / 8.0);
  return Tensor::from_vector(v, shape);
}

// f32 sums of up to ~50 products of values in [-1, 1]: a few ulp of the largest term apart.
void expect_close(const std::string& what, const std::vector<double>& ours, const nlohmann::json& torch) {
  ASSERT_EQ(ours.size(), torch.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < ours.size() && bad < 5; ++i) {
    const double t = torch[i].get<double>();
    if (!(std::fabs(ours[i] - t) <= 1e-5 * std::max(1.0, std::fabs(t)))) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": mixprec " << ours[i] << ", PyTorch " << t;
    }
  }
}

TEST(OpShapes, AsPyTorch) {
  std::ifstream f(std::string(MIXPREC_SOURCE_DIR) + "/tests/golden/data/op_shapes_torch113.json");
  ASSERT_TRUE(f.good()) << "run /usr/bin/python3 tests/golden/gen_op_shapes.py";
  const nlohmann::json golden = nlohmann::json::parse(f);
  ASSERT_EQ(golden.at("torch_version").get<std::string>().rfind("1.13", 0), 0u);
  int checked = 0, valued = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string op = c.at("op");
    SCOPED_TRACE(op + " " + c.at("shapes").dump() + " " + c.at("kwargs").dump() + ": PyTorch " + c.at("torch").dump());
    ASSERT_TRUE(ops().count(op)) << "no call for this op in op_shapes_test.cpp";
    std::vector<Tensor> xs;
    for (size_t k = 0; k < c.at("shapes").size(); ++k)
      xs.push_back(operand(k, c.at("shapes")[k].get<Shape>()).requires_grad_(true));
    std::string error;
    Tensor out;
    try {
      out = ops().at(op)(xs, c.at("kwargs"));
    } catch (const Error& e) {
      error = e.what();
    }
    ++checked;
    if (c.at("torch").is_string()) {
      EXPECT_NE(error, "") << "PyTorch raises, mixprec returned " << out.str();
      EXPECT_NE(error.find(op), std::string::npos) << "the message should name the op: " << error;
      continue;
    }
    ASSERT_EQ(error, "");
    ASSERT_EQ(out.shape(), c.at("torch").get<Shape>());
    const nlohmann::json& v = c.at("values");
    expect_close("output", out.to_vector_f64(), v.at("out"));
    sum(mul(out, loss_weights(out.shape()))).backward();
    for (size_t k = 0; k < xs.size(); ++k) {
      const Tensor g = xs[k].grad();
      // An input the op does not read (beta == 0) gets no gradient here, zeros in PyTorch.
      const std::vector<double> ours = g.defined() ? g.to_vector_f64() : std::vector<double>(size_t(xs[k].numel()), 0.0);
      expect_close("gradient of operand " + std::to_string(k), ours, v.at("grads")[k]);
    }
    ++valued;
  }
  EXPECT_GT(checked, 80);
  EXPECT_GT(valued, 35);
}

}  // namespace
}  // namespace mixprec
