// autocast_table_test.cpp: every row of the autocast policy table against the registered ops
// that consult it (src/ops/registry.h: no hand-kept list of cases here), and every op's
// output dtype against PyTorch 1.13's for its row's case in include/mixprec/ops/ops.def
// (tests/golden/data/autocast_dtypes_torch113.json, written by
// tests/golden/gen_autocast_table.py from ops.def).
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

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "mixprec/core/status.h"
#include "ops/registry.h"

namespace mixprec::amp {
namespace {

using registry::OpEntry;

// The cases: every registered op that consults a row (src/ops/registry.cpp, generated in
// part from include/mixprec/ops/ops.def), so a new op is checked here by registering.
std::vector<const OpEntry*> cases() {
  std::vector<const OpEntry*> out;
  for (const OpEntry& e : registry::all_ops())
    if (e.category) out.push_back(&e);
  return out;
}

OpId row_of(const OpEntry& e) { return *e.category; }

// Each row's PyTorch 1.13 case (ops.def's torch113 column), which
// tests/golden/gen_autocast_table.py ran: "none: why" where PyTorch 1.13 has no such op.
bool in_pytorch(OpId op) {
  static constexpr const char* kTorch113[] = {
#define MIXPREC_OP(name, policy, torch113) torch113,
#include "mixprec/ops/ops.def"
#undef MIXPREC_OP
  };
  static_assert(std::size(kTorch113) == size_t(OpId::count));
  return std::string(kTorch113[size_t(op)]).rfind("none:", 0) != 0;
}

// The golden's input variants for a case, over its floating inputs (integer inputs, such as
// a loss's targets or embedding's indices, are not autocast inputs).
std::map<std::string, std::vector<DType>> variants(const OpEntry& e) {
  size_t n = 0;
  for (const registry::InputSpec& s : e.inputs) n += s.classes == 0;
  std::map<std::string, std::vector<DType>> v{{"f32", std::vector<DType>(n, DType::f32)},
                                              {"bf16", std::vector<DType>(n, DType::bf16)}};
  if (n > 1) {
    std::vector<DType> mixed(n, DType::f32);
    mixed[0] = DType::bf16;
    v["bf16_f32"] = mixed;
  }
  return v;
}

// The entry's inputs, floating ones in `dtypes` (in order), class indices as the op harness
// makes them.
std::vector<Tensor> make_inputs(const OpEntry& e, const std::vector<DType>& dtypes) {
  std::vector<Tensor> out;
  size_t k = 0;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const registry::InputSpec& s = e.inputs[i];
    if (s.classes > 0) {
      std::vector<int64_t> t(size_t(shape_numel(s.shape)));
      for (size_t j = 0; j < t.size(); ++j) t[j] = int64_t(j * 7 + 3) % s.classes;
      out.push_back(Tensor::from_vector_i64(t, s.shape));
      continue;
    }
    manual_seed(100 + i);
    out.push_back(Tensor::uniform(s.shape, s.low, s.high).to(dtypes[k++]));
  }
  return out;
}

// What the policy does to the inputs, written out here independently of amp::cast_inputs.
std::vector<Tensor> cast_by_hand(const std::vector<Tensor>& in, CastPolicy p, DType autocast) {
  auto castable = [](const Tensor& x) { return is_floating(x.dtype()) && x.dtype() != DType::f64; };
  std::vector<Tensor> out;
  std::optional<DType> widest;  // over the floating inputs (integer ones stay as they are)
  for (const Tensor& x : in)
    if (is_floating(x.dtype())) widest = widest ? promote_types(*widest, x.dtype()) : x.dtype();
  for (const Tensor& x : in) {
    switch (p) {
      case CastPolicy::lower: out.push_back(castable(x) ? x.to(autocast) : x); break;
      case CastPolicy::fp32: out.push_back(castable(x) ? x.to(DType::f32) : x); break;
      case CastPolicy::promote: out.push_back(is_floating(x.dtype()) ? x.to(*widest) : x); break;
      case CastPolicy::keep: out.push_back(x); break;
    }
  }
  return out;
}

// The op's output, or nullopt when it throws (mixprec::Error: a dtype mismatch).
std::optional<Tensor> run(const OpEntry& c, const std::vector<Tensor>& in) {
  try {
    NoGradGuard ng;
    return c.run(in);
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
  for (const OpEntry* c : cases()) covered.insert(row_of(*c));
  for (int i = 0; i < int(OpId::count); ++i) EXPECT_TRUE(covered.count(OpId(i))) << op_name(OpId(i));
}

// Each op, under each autocast dtype, for each input variant, with its row's policy and
// with each policy forced: the output is the op's output without autocast on the inputs
// cast as that policy says (same dtype, same bits; or both raise).
TEST(AutocastTable, EveryOpAppliesItsRowAndOnlyItsRow) {
  OverridesCleared cleanup;
  const std::optional<CastPolicy> policies[] = {std::nullopt, CastPolicy::lower, CastPolicy::fp32,
                                                CastPolicy::promote, CastPolicy::keep};
  for (const OpEntry* e : cases()) {
    const OpEntry& c = *e;
    if (!c.half) continue;  // f32 only: bf16 inputs and the lower policy do not apply
    for (const DType ac : {DType::bf16, DType::f16}) {
      for (const auto& [variant, dtypes] : variants(c)) {
        for (const auto& forced : policies) {
          clear_policy_overrides();
          if (forced) set_policy_override(row_of(c), *forced);
          const CastPolicy p = policy_for(row_of(c));
          SCOPED_TRACE(std::string(c.name) + " under " + dtype_name(ac) + " autocast, inputs " + variant +
                       ", policy " + policy_name(p) + (forced ? " (forced)" : ""));
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
// mul's, mse_loss not sub's/mean's, relu_max_pool2d's fallback not relu's twice, ... (the
// rows an entry declares in also_consults excepted).
TEST(AutocastTable, OtherRowsOverridesDoNotLeakIntoAnOp) {
  OverridesCleared cleanup;
  for (const OpEntry* e : cases()) {
    const OpEntry& c = *e;
    if (!c.half) continue;
    for (const auto& [variant, dtypes] : variants(c)) {
      SCOPED_TRACE(std::string(c.name) + ", inputs " + variant);
      const std::vector<Tensor> in = make_inputs(c, dtypes);
      clear_policy_overrides();
      std::optional<Tensor> alone;
      {
        AutocastGuard g(DType::bf16);
        alone = run(c, in);
      }
      for (int i = 0; i < int(OpId::count); ++i) {
        const OpId other = OpId(i);
        const bool consulted = other == row_of(c) || std::find(c.also_consults.begin(), c.also_consults.end(),
                                                                 other) != c.also_consults.end();
        if (!consulted) set_policy_override(other, CastPolicy::lower);
      }
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

// Every registered op against its row's PyTorch case: an op's variants (matmul.3d, sum.all,
// mul.scalar) must give the dtypes of their row's PyTorch case, for the input variants they
// have.
TEST(AutocastTable, OutputDtypesMatchPyTorchOrAreListedDifferences) {
  clear_policy_overrides();
  const nlohmann::json golden = load_golden();
  const auto listed = differences_from_pytorch();
  std::vector<int> used(listed.size(), 0);
  std::set<std::string> seen;
  for (const OpEntry* e : cases()) {
    const OpEntry& c = *e;
    if (!in_pytorch(row_of(c))) continue;
    const std::string row = op_name(row_of(c));
    ASSERT_TRUE(golden.at("ops").contains(row))
        << row << ": regenerate the golden (/usr/bin/python3 tests/golden/gen_autocast_table.py)";
    seen.insert(row);
    for (const std::string mode : {"bf16_autocast", "no_autocast"}) {
      const nlohmann::json& g = golden.at("ops").at(row).at(mode);
      for (const auto& [variant, dtypes] : variants(c)) {
        if (!c.half && variant != "f32") continue;
        SCOPED_TRACE(std::string(c.name) + " (row " + row + "), " + mode + ", inputs " + variant);
        ASSERT_TRUE(g.contains(variant)) << "PyTorch's case of this row has other inputs";
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
          if (op_name(d.op) != row || d.mode != mode || d.inputs != variant) continue;
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
  for (int i = 0; i < int(OpId::count); ++i)
    if (in_pytorch(OpId(i))) EXPECT_TRUE(seen.count(op_name(OpId(i)))) << op_name(OpId(i)) << ": no registered op ran";
  EXPECT_EQ(seen.size(), golden.at("ops").size()) << "the golden has rows ops.def does not give a PyTorch case";
  for (size_t k = 0; k < listed.size(); ++k)
    EXPECT_GE(used[k], 1) << "listed difference not found in the golden: " << op_name(listed[k].op) << " "
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
