// autocast_table_test.cpp: every row of the autocast policy table against its op, and every
// op's output dtype against PyTorch 1.13's (tests/golden/data/autocast_dtypes_torch113.json,
// written by tests/golden/gen_autocast_table.py).
//
// - Table and ops agree: under bf16 and f16 autocast, with each row's own policy and with
//   each of the four policies forced by an override, an op's output equals (dtype and bits)
//   the same op run without autocast on inputs cast by hand as that policy says. An op that
//   ignored its row, or applied another row, fails here.
// - PyTorch: under bf16 autocast and without autocast, an op's output dtype equals PyTorch's
//   for the same inputs, or the difference is listed in amp::differences_from_pytorch() with
//   the same two dtypes; a listed difference that no longer occurs fails too.
// - docs/amp.md's "Differences from PyTorch" table has exactly the listed rows, word for word.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/amp.h"
#include "mixprec/autograd.h"
#include "mixprec/ops.h"
#include "mixprec/status.h"

namespace mixprec::amp {
namespace {

struct InputSpec {
  Shape shape;
  bool positive;  // values in [0.5, 1.5) (log, a divisor, a norm weight); else [-1, 1)
};

// The golden's op cases (gen_autocast_table.py CASES): same names, shapes and arguments.
// The first floating input is the data input; targets and running statistics are made
// inside (i64 / f32), as they are not autocast inputs.
struct OpCase {
  std::string name;  // the golden's key
  OpId op;           // the row it exercises
  std::vector<InputSpec> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  bool in_pytorch = true;  // false: mixprec's own op, absent from the PyTorch golden
};

const Tensor& target4() {
  static const Tensor t = Tensor::from_vector_i64({1, 0, 3, 2}, {4});
  return t;
}

std::vector<OpCase> cases() {
  using V = const std::vector<Tensor>&;
  return {
      {"conv2d", OpId::conv2d, {{{2, 3, 6, 6}, false}, {{4, 3, 3, 3}, false}, {{4}, false}},
       [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"linear", OpId::linear, {{{4, 8}, false}, {{5, 8}, false}, {{5}, false}},
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"matmul", OpId::matmul, {{{4, 8}, false}, {{8, 3}, false}}, [](V x) { return matmul(x[0], x[1]); }},
      {"bmm", OpId::bmm, {{{2, 4, 8}, false}, {{2, 8, 3}, false}}, [](V x) { return matmul(x[0], x[1]); }},
      {"softmax", OpId::softmax, {{{4, 5}, false}}, [](V x) { return softmax(x[0], 1); }},
      {"log_softmax", OpId::log_softmax, {{{4, 5}, false}}, [](V x) { return log_softmax(x[0], 1); }},
      {"layer_norm", OpId::layer_norm, {{{4, 6}, false}, {{6}, true}, {{6}, false}},
       [](V x) { return layer_norm(x[0], {6}, x[1], x[2]); }},
      {"batch_norm", OpId::batch_norm, {{{2, 3, 4, 4}, false}, {{3}, true}, {{3}, false}},
       [](V x) { return batch_norm(x[0], Tensor::zeros({3}), Tensor::ones({3}), x[1], x[2], true); }},
      {"exp", OpId::exp, {{{7}, false}}, [](V x) { return exp(x[0]); }},
      {"log", OpId::log, {{{7}, true}}, [](V x) { return log(x[0]); }},
      {"pow", OpId::pow, {{{4, 6}, false}}, [](V x) { return pow(x[0], 3.0); }},
      {"sum", OpId::sum, {{{3, 4}, false}}, [](V x) { return sum(x[0], {1}); }},
      {"mean", OpId::mean, {{{3, 4}, false}}, [](V x) { return mean(x[0]); }},
      {"mse_loss", OpId::mse_loss, {{{4, 5}, false}, {{4, 5}, false}}, [](V x) { return mse_loss(x[0], x[1]); }},
      {"nll_loss", OpId::nll_loss, {{{4, 5}, false}}, [](V x) { return nll_loss(x[0], target4()); }},
      {"cross_entropy", OpId::cross_entropy, {{{4, 5}, false}},
       [](V x) { return cross_entropy(x[0], target4()); }},
      {"add", OpId::add, {{{4, 5}, false}, {{4, 5}, false}}, [](V x) { return add(x[0], x[1]); }},
      {"sub", OpId::sub, {{{4, 5}, false}, {{4, 5}, false}}, [](V x) { return sub(x[0], x[1]); }},
      {"mul", OpId::mul, {{{4, 5}, false}, {{5}, false}}, [](V x) { return mul(x[0], x[1]); }},
      {"div", OpId::div, {{{4, 5}, false}, {{4, 5}, true}}, [](V x) { return div(x[0], x[1]); }},
      {"cat", OpId::cat, {{{2, 3}, false}, {{2, 3}, false}}, [](V x) { return cat({x[0], x[1]}, 0); }},
      {"stack", OpId::stack, {{{2, 3}, false}, {{2, 3}, false}}, [](V x) { return stack({x[0], x[1]}, 1); }},
      {"relu", OpId::relu, {{{4, 5}, false}}, [](V x) { return relu(x[0]); }},
      {"gelu", OpId::gelu, {{{4, 5}, false}}, [](V x) { return gelu(x[0]); }},
      {"max_pool2d", OpId::max_pool2d, {{{1, 2, 4, 4}, false}}, [](V x) { return max_pool2d(x[0], 2); }},
      {"avg_pool2d", OpId::avg_pool2d, {{{1, 2, 4, 4}, false}}, [](V x) { return avg_pool2d(x[0], 2); }},
      {"dropout", OpId::dropout, {{{5, 7}, false}}, [](V x) {
         manual_seed(7);  // the same mask in every run the test compares
         return dropout(x[0], 0.4, true);
       }},
      {"reshape", OpId::reshape, {{{4, 5}, false}}, [](V x) { return reshape(x[0], {5, 4}); }},
      {"flatten", OpId::flatten, {{{2, 3, 2, 2}, false}}, [](V x) { return flatten(x[0], 1); }},
      {"transpose", OpId::transpose, {{{3, 4}, false}}, [](V x) { return transpose(x[0], 0, 1); }},
      {"neg", OpId::neg, {{{4, 5}, false}}, [](V x) { return neg(x[0]); }},
      {"embedding", OpId::embedding, {{{5, 3}, false}},
       [](V x) { return embedding(Tensor::from_vector_i64({4, 0, 2, 4}, {2, 2}), x[0]); }},
      {"attention_softmax", OpId::attention_softmax, {{{2, 3, 5}, false}},
       [](V x) { return attention_softmax(x[0]); }, /*in_pytorch=*/false},
      {"scaled_dot_product_attention", OpId::scaled_dot_product_attention,
       {{{2, 5, 4}, false}, {{2, 5, 4}, false}, {{2, 5, 4}, false}},
       [](V x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }, /*in_pytorch=*/false},
      {"mm", OpId::mm, {{{4, 8}, false}, {{8, 3}, false}}, [](V x) { return mm(x[0], x[1]); }},
      {"mv", OpId::mv, {{{4, 8}, false}, {{8}, false}}, [](V x) { return mv(x[0], x[1]); }},
      {"addmm", OpId::addmm, {{{4, 3}, false}, {{4, 8}, false}, {{8, 3}, false}},
       [](V x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); }},
      {"addmv", OpId::addmv, {{{4}, false}, {{4, 8}, false}, {{8}, false}},
       [](V x) { return addmv(x[0], x[1], x[2], 0.5, 2.0); }},
      {"addr", OpId::addr, {{{4, 3}, false}, {{4}, false}, {{3}, false}},
       [](V x) { return addr(x[0], x[1], x[2], 0.5, 2.0); }},
      {"baddbmm", OpId::baddbmm, {{{2, 4, 3}, false}, {{2, 4, 8}, false}, {{2, 8, 3}, false}},
       [](V x) { return baddbmm(x[0], x[1], x[2], 0.5, 2.0); }},
      {"addbmm", OpId::addbmm, {{{4, 3}, false}, {{2, 4, 8}, false}, {{2, 8, 3}, false}},
       [](V x) { return addbmm(x[0], x[1], x[2], 0.5, 2.0); }},
      {"chain_matmul", OpId::chain_matmul, {{{4, 8}, false}, {{8, 3}, false}, {{3, 5}, false}},
       [](V x) { return chain_matmul({x[0], x[1], x[2]}); }},
      {"prelu", OpId::prelu, {{{2, 3, 4}, false}, {{3}, true}}, [](V x) { return prelu(x[0], x[1]); }},
      {"mul_scalar", OpId::mul, {{{4, 5}, false}}, [](V x) { return mul(x[0], 2.5); }},
      {"add_scalar", OpId::add, {{{4, 5}, false}}, [](V x) { return add(x[0], 2.5); }},
  };
}

// The golden's input variants for a case.
std::map<std::string, std::vector<DType>> variants(const OpCase& c) {
  const size_t n = c.inputs.size();
  std::map<std::string, std::vector<DType>> v{{"f32", std::vector<DType>(n, DType::f32)},
                                              {"bf16", std::vector<DType>(n, DType::bf16)}};
  if (n > 1) {
    std::vector<DType> mixed(n, DType::f32);
    mixed[0] = DType::bf16;
    v["bf16_f32"] = mixed;
  }
  return v;
}

std::vector<Tensor> make_inputs(const OpCase& c, const std::vector<DType>& dtypes) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    manual_seed(100 + i);
    const InputSpec& s = c.inputs[i];
    out.push_back(Tensor::uniform(s.shape, s.positive ? 0.5 : -1.0, s.positive ? 1.5 : 1.0).to(dtypes[i]));
  }
  return out;
}

// What the policy does to the inputs, written out here independently of amp::cast_inputs.
std::vector<Tensor> cast_by_hand(const std::vector<Tensor>& in, CastPolicy p, DType autocast) {
  auto castable = [](const Tensor& x) { return is_floating(x.dtype()) && x.dtype() != DType::f64; };
  std::vector<Tensor> out;
  DType widest = in[0].dtype();
  for (const Tensor& x : in) widest = promote_types(widest, x.dtype());
  for (const Tensor& x : in) {
    switch (p) {
      case CastPolicy::lower: out.push_back(castable(x) ? x.to(autocast) : x); break;
      case CastPolicy::fp32: out.push_back(castable(x) ? x.to(DType::f32) : x); break;
      case CastPolicy::promote: out.push_back(x.to(widest)); break;
      case CastPolicy::keep: out.push_back(x); break;
    }
  }
  return out;
}

// The op's output, or nullopt when it throws (mixprec::Error: a dtype mismatch).
std::optional<Tensor> run(const OpCase& c, const std::vector<Tensor>& in) {
  try {
    return c.fn(in);
  } catch (const Error&) {
    return std::nullopt;
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data(), cb.data(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

std::string describe(const std::optional<Tensor>& t) { return t ? dtype_name(t->dtype()) : "error"; }

struct OverridesCleared {
  ~OverridesCleared() { clear_policy_overrides(); }
};

TEST(AutocastTable, EveryRowHasACase) {
  std::set<OpId> covered;
  for (const OpCase& c : cases()) covered.insert(c.op);
  for (int i = 0; i < int(OpId::count); ++i) EXPECT_TRUE(covered.count(OpId(i))) << op_name(OpId(i));
}

// Each op, under each autocast dtype, for each input variant, with its row's policy and
// with each policy forced: the output is the op's output without autocast on the inputs
// cast as that policy says (same dtype, same bits; or both raise).
TEST(AutocastTable, EveryOpAppliesItsRowAndOnlyItsRow) {
  OverridesCleared cleanup;
  const std::optional<CastPolicy> policies[] = {std::nullopt, CastPolicy::lower, CastPolicy::fp32,
                                                CastPolicy::promote, CastPolicy::keep};
  for (const OpCase& c : cases()) {
    for (const DType ac : {DType::bf16, DType::f16}) {
      for (const auto& [variant, dtypes] : variants(c)) {
        for (const auto& forced : policies) {
          clear_policy_overrides();
          if (forced) set_policy_override(c.op, *forced);
          const CastPolicy p = policy_for(c.op);
          SCOPED_TRACE(c.name + " under " + dtype_name(ac) + " autocast, inputs " + variant + ", policy " +
                       policy_name(p) + (forced ? " (forced)" : ""));
          const std::vector<Tensor> in = make_inputs(c, dtypes);
          std::optional<Tensor> under;
          {
            AutocastGuard g(ac);
            under = run(c, in);
          }
          const std::optional<Tensor> by_hand = run(c, cast_by_hand(in, p, ac));
          ASSERT_EQ(describe(under), describe(by_hand));
          if (under) EXPECT_TRUE(same_bits(*under, *by_hand));
        }
      }
    }
  }
}

// Another row's override must not reach an op: flatten does not use reshape's row, neg not
// mul's, mse_loss not sub's/mean's, relu_max_pool2d's fallback not relu's twice, ...
TEST(AutocastTable, OtherRowsOverridesDoNotLeakIntoAnOp) {
  OverridesCleared cleanup;
  for (const OpCase& c : cases()) {
    for (const auto& [variant, dtypes] : variants(c)) {
      SCOPED_TRACE(c.name + ", inputs " + variant);
      const std::vector<Tensor> in = make_inputs(c, dtypes);
      clear_policy_overrides();
      std::optional<Tensor> alone;
      {
        AutocastGuard g(DType::bf16);
        alone = run(c, in);
      }
      for (int i = 0; i < int(OpId::count); ++i)
        if (OpId(i) != c.op) set_policy_override(OpId(i), CastPolicy::lower);
      std::optional<Tensor> others_lowered;
      {
        AutocastGuard g(DType::bf16);
        others_lowered = run(c, in);
      }
      ASSERT_EQ(describe(alone), describe(others_lowered));
      if (alone) EXPECT_TRUE(same_bits(*alone, *others_lowered));
    }
  }
}

nlohmann::json load_golden() {
  std::ifstream f(std::string(MIXPREC_SOURCE_DIR) + "/tests/golden/data/autocast_dtypes_torch113.json");
  EXPECT_TRUE(f.good()) << "run /usr/bin/python3 tests/golden/gen_autocast_table.py";
  return nlohmann::json::parse(f);
}

std::string golden_dtype(const nlohmann::json& v) {
  const std::string s = v.get<std::string>();
  return s.rfind("error", 0) == 0 ? "error" : s;
}

TEST(AutocastTable, OutputDtypesMatchPyTorchOrAreListedDifferences) {
  clear_policy_overrides();
  const nlohmann::json golden = load_golden();
  const auto listed = differences_from_pytorch();
  std::vector<int> used(listed.size(), 0);
  std::set<std::string> seen;
  for (const OpCase& c : cases()) {
    if (!c.in_pytorch) continue;
    ASSERT_TRUE(golden.at("ops").contains(c.name)) << c.name << ": regenerate the golden";
    seen.insert(c.name);
    for (const std::string mode : {"bf16_autocast", "no_autocast"}) {
      const nlohmann::json& g = golden.at("ops").at(c.name).at(mode);
      for (const auto& [variant, dtypes] : variants(c)) {
        SCOPED_TRACE(c.name + ", " + mode + ", inputs " + variant);
        ASSERT_TRUE(g.contains(variant));
        std::optional<Tensor> out;
        if (mode == "bf16_autocast") {
          AutocastGuard guard(DType::bf16);
          out = run(c, make_inputs(c, dtypes));
        } else {
          out = run(c, make_inputs(c, dtypes));
        }
        const std::string ours = describe(out), torch = golden_dtype(g.at(variant));
        int matches = 0;
        for (size_t k = 0; k < listed.size(); ++k) {
          const TorchDifference& d = listed[k];
          if (op_name(d.op) != c.name || d.mode != mode || d.inputs != variant) continue;
          ++matches;
          ++used[k];
          EXPECT_EQ(torch, d.pytorch) << "the listed PyTorch dtype is stale";
          EXPECT_EQ(ours, d.mixprec) << "the listed mixprec dtype is stale";
        }
        if (matches == 0)
          EXPECT_EQ(ours, torch) << "an undocumented difference from PyTorch: list it in "
                                    "src/amp/policy.cpp (kDifferences) and docs/amp.md, or match PyTorch";
        EXPECT_LE(matches, 1) << "listed twice";
      }
    }
  }
  EXPECT_EQ(seen.size(), golden.at("ops").size()) << "the golden has ops this test does not run";
  for (size_t k = 0; k < listed.size(); ++k)
    EXPECT_EQ(used[k], 1) << "listed difference not found in the golden: " << op_name(listed[k].op) << " "
                          << listed[k].mode << " " << listed[k].inputs;
}

// The documentation's claim about f16 autocast on CPU (no per-op comparison is possible).
TEST(AutocastTable, PyTorchCannotEnterAnF16CpuRegion) {
  const nlohmann::json golden = load_golden();
  const auto& f16 = golden.at("f16_autocast_cpu");
  EXPECT_EQ(f16.at("enter").get<std::string>().rfind("error", 0), 0u) << f16.dump();
  ASSERT_FALSE(f16.at("warnings").empty());
  EXPECT_NE(f16.at("warnings")[0].get<std::string>().find("bfloat16"), std::string::npos);
  EXPECT_EQ(golden.at("torch_version").get<std::string>().rfind("1.13", 0), 0u);
}

std::string docs_differences_section() {
  std::ifstream f(std::string(MIXPREC_SOURCE_DIR) + "/docs/amp.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t begin = doc.find("### Differences from PyTorch");
  EXPECT_NE(begin, std::string::npos);
  const size_t end = doc.find("\n#", begin + 4);
  return doc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(AutocastTable, DocsListExactlyTheDifferences) {
  const std::string section = docs_differences_section();
  size_t rows = 0;
  for (size_t at = section.find("\n| `"); at != std::string::npos; at = section.find("\n| `", at + 1)) ++rows;
  EXPECT_EQ(rows, differences_from_pytorch().size()) << "one docs row per listed difference:\n" << section;
  for (const TorchDifference& d : differences_from_pytorch()) {
    const std::string row = std::string("| `") + op_name(d.op) + "` | " + d.mode + " | " + d.inputs + " | " +
                            d.pytorch + " | " + d.mixprec + " | " + d.why + " |\n";
    EXPECT_NE(section.find(row), std::string::npos) << "docs/amp.md lacks the row " << row;
  }
}

TEST(AutocastTable, PolicyCommandPrintsEveryRowAndDifference) {
  OverridesCleared cleanup;
  clear_policy_overrides();
  set_policy_override(OpId::softmax, CastPolicy::keep);
  const std::string text = policy_table_string();
  for (int i = 0; i < int(OpId::count); ++i) {
    const OpId op = OpId(i);
    std::istringstream lines(text);
    std::string line;
    bool found = false;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::string name, policy;
      words >> name >> policy;
      if (name != op_name(op)) continue;
      found = true;
      EXPECT_EQ(policy, policy_name(policy_for(op))) << line;
      EXPECT_EQ(line.find("(overridden)") != std::string::npos, op == OpId::softmax) << line;
      break;
    }
    EXPECT_TRUE(found) << op_name(op);
  }
  for (const TorchDifference& d : differences_from_pytorch()) EXPECT_NE(text.find(d.why), std::string::npos);
}

}  // namespace
}  // namespace mixprec::amp
