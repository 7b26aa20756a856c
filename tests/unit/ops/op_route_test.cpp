// op_route_test.cpp: the one route an op takes (docs/design.md, "Where an op lives"):
//   public declaration (include/mixprec/ops*.h) -> src/ops/<family>.cpp (checks, its autocast
//   row through ops/autocast_hook.h, the kernel call, the backward closure) -> a kernel
//   behind src/backend/kernels.h (backend/ref, backend/onednn, backend/cpu).
// This test reads the sources and fails, naming the file and line, for
// - a public op with no entry in the op registry (src/ops/registry.h), so the op harness
//   would not check it;
// - a row of the policy table that no registered op consults;
// - a src/ops file that reaches a backend other than through kernels.h, includes an amp
//   header (amp sits above ops), or holds a kernel loop (OpenMP, intrinsics, raw element
//   buffers: those live in src/backend);
// - a src/nn file that includes a backend or holds a kernel loop (modules compose ops);
// - a registered op whose kernels do not all go through ops/dispatch.h's route: run forward
//   and backward, an op must log its route (MIXPREC_VERBOSE=dispatch), and with
//   MIXPREC_BACKEND=ref every kernel it runs must be a ref kernel, or a cpu kernel the log
//   says has no ref counterpart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/dispatch_log.h"
#include "common/finite_diff.h"
#include "common/op_inputs.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"
#include "ops/dispatch.h"
#include "ops/registry.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = MIXPREC_SOURCE_DIR;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<fs::path> sources_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".cpp" || e.path().extension() == ".h") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The functions returning a Tensor (or attention's operands, or add_layer_norm's two
// outputs) declared in the public op headers, and the ops ops.def declares
// (MIXPREC_UNARY_OP and MIXPREC_BINARY_OP lines).
std::set<std::string> public_ops() {
  const std::regex decl(R"(^(?:Tensor|AttentionOperands|ResidualLayerNorm)\s+([a-z_0-9]+)\s*\()");
  const std::regex unary(R"(^MIXPREC_(?:UNARY|BINARY)_OP\(([a-z_0-9]+),)");
  std::set<std::string> names;
  for (const char* h : {"ops.h", "ops_fused.h", "ops.def"})
    for (const auto& line : lines_of(kSource / "include/mixprec/ops" / h)) {
      std::smatch m;
      if (std::regex_search(line, m, decl) || std::regex_search(line, m, unary)) names.insert(m[1]);
    }
  return names;
}

// Names match exactly: an entry is the public function's name, or that name, a '.' and a
// variant ("matmul.3d"), so the entry relu_max_pool2d does not stand in for relu, nor
// log_softmax for log.
TEST(OpRoute, EveryPublicOpIsRegistered) {
  const std::set<std::string> ops = public_ops();
  ASSERT_GT(ops.size(), 30u) << "the header scan found too few ops";
  std::set<std::string> registered;
  for (const auto& e : registry::all_ops()) registered.insert(std::string(registry::function_of(e)));
  for (const auto& name : ops)
    EXPECT_TRUE(registered.count(name)) << "public op " << name
                                        << " has no entry in src/ops/registry.cpp (register it: the op "
                                           "harness checks only registered ops)";
  // And every entry names a public op.
  for (const auto& e : registry::all_ops())
    EXPECT_TRUE(ops.count(std::string(registry::function_of(e))))
        << "registry entry " << e.name << " names no public op (\"<function>\" or \"<function>.<variant>\")";
}

TEST(OpRoute, EveryPolicyRowIsConsultedByARegisteredOp) {
  for (int i = 0; i < int(amp::OpId::count); ++i) {
    bool used = false;
    for (const auto& e : registry::all_ops()) used = used || (e.category && int(*e.category) == i);
    EXPECT_TRUE(used) << "policy row " << amp::op_name(amp::OpId(i))
                      << " is consulted by no registered op";
  }
}

// ---- the kernel route, run ----


// The backends the dispatch log named while the entry ran forward and backward (the text
// after " -> ", without a fallback's reason; oneDNN's own implementation lines, which say
// "(oneDNN)", are marked as such).
std::vector<std::string> backends_logged(const registry::OpEntry& e, DType dtype) {
  std::vector<std::string> lines;
  backend::set_dispatch_sink([&](const std::string& line) { lines.push_back(line); });
  backend::set_dispatch_verbose(true);
  struct Restore {
    ~Restore() {
      backend::set_dispatch_verbose(false);
      backend::set_dispatch_sink({});
    }
  } restore;
  Tensor out = e.run(test::op_inputs(e, dtype, /*with_grad=*/true));
  if (e.differentiable && out.requires_grad()) out.backward(Tensor::ones(out.shape(), out.dtype()));
  std::vector<std::string> backends;
  for (const std::string& line : lines) {
    const size_t arrow = line.find(" -> ");
    std::string b = arrow == std::string::npos ? line : line.substr(arrow + 4);
    if (b.find(" (oneDNN)") != std::string::npos) b = "oneDNN implementation: " + b;
    const size_t colon = b.find(": ");
    if (colon != std::string::npos && b.rfind("oneDNN implementation", 0) != 0) b = b.substr(0, colon);
    backends.push_back(b);
  }
  return backends;
}

std::vector<DType> dtypes_of(const registry::OpEntry& e) {
  if (e.half) return {DType::f32, DType::bf16};
  return {DType::f32};
}

TEST(OpRoute, EveryRegisteredOpLogsItsRoute) {
  ops_detail::set_forced_ref(false);
  const std::set<std::string> production = {"onednn", "cpu", "composition of ops", "view", "ref (fallback)"};
  for (const auto& e : registry::all_ops())
    for (DType dt : dtypes_of(e)) {
      SCOPED_TRACE(std::string(e.name) + " " + dtype_name(dt));
      const std::vector<std::string> backends = backends_logged(e, dt);
      EXPECT_FALSE(backends.empty()) << "no kernel call went through ops/dispatch.h's route";
      for (const std::string& b : backends)
        if (b.rfind("oneDNN implementation", 0) != 0) EXPECT_TRUE(production.count(b)) << b;
    }
}

// MIXPREC_BACKEND=ref reaches every op: each kernel it runs is backend/ref's, or a cpu
// kernel that has no ref counterpart and says so; oneDNN runs nothing.
TEST(OpRoute, BackendRefReachesEveryRegisteredOp) {
  ops_detail::set_forced_ref(true);
  struct Restore {
    ~Restore() { ops_detail::set_forced_ref(false); }
  } restore;
  const std::set<std::string> on_ref = {"ref", "cpu (no ref kernel)", "composition of ops", "view"};
  for (const auto& e : registry::all_ops())
    for (DType dt : dtypes_of(e)) {
      SCOPED_TRACE(std::string(e.name) + " " + dtype_name(dt));
      const std::vector<std::string> backends = backends_logged(e, dt);
      EXPECT_FALSE(backends.empty()) << "no kernel call went through ops/dispatch.h's route";
      for (const std::string& b : backends) EXPECT_TRUE(on_ref.count(b)) << b;
    }
}

struct Rule {
  std::regex pattern;
  const char* why;
};

void expect_clean(const fs::path& dir, const std::vector<Rule>& rules) {
  const auto files = sources_in(dir);
  ASSERT_FALSE(files.empty()) << dir;
  for (const auto& f : files) {
    const auto lines = lines_of(f);
    for (size_t i = 0; i < lines.size(); ++i)
      for (const auto& r : rules)
        if (std::regex_search(lines[i], r.pattern))
          ADD_FAILURE() << fs::relative(f, kSource).string() << ":" << i + 1 << ": " << r.why
                        << "\n    " << lines[i];
  }
}

// Markers of a kernel loop: work on element buffers, threads or vector registers.
std::vector<Rule> kernel_rules() {
  return {
      {std::regex(R"(#\s*pragma\s+omp)"), "an OpenMP loop is a kernel: move it to src/backend"},
      {std::regex(R"(immintrin|__m(256|512))"), "vector intrinsics belong in src/backend/cpu"},
      {std::regex(R"(\bdata_ptr\s*<|\.data\(\))"), "raw element access is a kernel's job"},
      {std::regex(R"(\bmemcpy\b|\bconvert_elements\b)"), "element copies are kernels"},
  };
}

TEST(OpRoute, OpsReachBackendsOnlyThroughKernelsHAndHoldNoKernels) {
  std::vector<Rule> rules = kernel_rules();
  rules.push_back({std::regex(R"(#include\s+"backend/(cpu|ref|onednn)/)"),
                   "include backend/kernels.h (or ops/dispatch.h), not a backend's own header"});
  rules.push_back({std::regex(R"(#include\s+"(amp/|mixprec/amp/))"),
                   "ops ask autocast through ops/autocast_hook.h; amp sits above ops"});
  rules.push_back({std::regex(R"(\bamp::(cast_inputs?|AutocastSuspend|policy_for|is_autocast_enabled)\b)"),
                   "an op applies its row through ops_detail::autocast_inputs only"});
  expect_clean(kSource / "src/ops", rules);
}

TEST(OpRoute, NnModulesComposeOpsAndHoldNoKernels) {
  std::vector<Rule> rules = kernel_rules();
  rules.push_back({std::regex(R"(#include\s+"(backend/|ops/|autograd/))"),
                   "a module composes public ops; kernels and graph records belong in src/ops"});
  rules.push_back({std::regex(R"(\brecord_op\b)"), "a module records no autograd node itself"});
  expect_clean(kSource / "src/nn", rules);
}

}  // namespace
}  // namespace mixprec
