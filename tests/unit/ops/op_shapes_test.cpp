// op_shapes_test.cpp: mixprec's ops against PyTorch 1.13 on good and bad operand shapes
// (tests/golden/data/op_shapes_torch113.json, written by tests/golden/gen_op_shapes.py):
// the same output shape where PyTorch runs, a mixprec::Error naming the op where PyTorch
// raises. New ops add their cases to the generator and their call to ops() below.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <string>

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
      {"prelu", [](Args x, Kw) { return prelu(x.at(0), x.at(1)); }},
      {"conv1d", [](Args x, Kw k) {
         return conv1d(x.at(0), x.at(1), x.size() > 2 ? x[2] : Tensor(), int64_t(kw(k, "stride", 1)),
                       int64_t(kw(k, "padding", 0)));
       }},
      {"conv_transpose1d", [](Args x, Kw k) {
         return conv_transpose1d(x.at(0), x.at(1), x.size() > 2 ? x[2] : Tensor(), int64_t(kw(k, "stride", 1)),
                                 int64_t(kw(k, "padding", 0)), int64_t(kw(k, "output_padding", 0)));
       }},
      {"conv_transpose2d", [](Args x, Kw k) {
         return conv_transpose2d(x.at(0), x.at(1), x.size() > 2 ? x[2] : Tensor(), int64_t(kw(k, "stride", 1)),
                                 int64_t(kw(k, "padding", 0)), int64_t(kw(k, "output_padding", 0)));
       }},
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

}  // namespace
}  // namespace mixprec
