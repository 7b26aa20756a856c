// layer_types_test.cpp: the layer-type table (src/nn/layer_type.h) checked entry by entry, so
// a new type is covered by being listed: every entry has all its parts, a documented row in
// docs/models.md and an example model file that plans, builds and runs, whose modules the
// exporter finds to be the type's own, and whose summary rows carry the type. (Its ONNX graph
// is checked against mixprec's logits by onnx_export_test.)
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "mixprec/autograd/autograd.h"
#include "mixprec/nn/model_file.h"
#include "nn/layer_type.h"

namespace mixprec::nn {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The example's model, its input and its spec (as train would build it: model_file_spec).
struct Example {
  std::shared_ptr<Module> model;
  Tensor input;
  std::vector<ModelFileLayer> rows;
};

StatusOr<Example> build_example(const LayerType& t) {
  const std::string text = t.example;
  const bool language_model = model_file_context(text).has_value(), ids = language_model || model_file_reads_text(text);
  Example e;
  auto m = ids ? build_model_file(text, "example.yaml", 1, 1, 8, language_model ? 256 : 3, &e.rows,
                                  kMaxModelFileParameters, true)
               : build_model_file(text, "example.yaml", 2, 6, 6, 3, &e.rows);
  if (!m.is_ok()) return m.status();
  e.model = *m;
  if (ids) {
    std::vector<int64_t> tokens;
    for (int64_t i = 0; i < 16; ++i) tokens.push_back((i * 37 + 11) % 256);
    e.input = Tensor::from_vector_i64(tokens, {2, 8});
  } else {
    e.input = Tensor::uniform({2, 2, 6, 6}, -1.0, 1.0);
  }
  return e;
}

// The modules the exporter would hand to `t`, walking as it does (a layer type's module is a
// leaf of the walk; Sequential containers are walked through).
int claimed_by(const Module& m, const LayerType& t, int rank) {
  const OnnxValue x{"x", rank};
  if (const LayerType* owner = layer_type_of(m, x)) return owner == &t ? 1 : 0;
  int n = 0;
  for (const auto& [name, child] : m.children()) n += claimed_by(*child, t, rank);
  return n;
}

TEST(LayerTypes, EveryEntryHasEveryPartAndAUniqueName) {
  std::set<std::string> names;
  for (const LayerType* t : layer_types()) {
    SCOPED_TRACE(t->name);
    EXPECT_TRUE(names.insert(t->name).second) << "two entries named " << t->name;
    EXPECT_NE(t->plan, nullptr);
    EXPECT_NE(t->build, nullptr);
    EXPECT_NE(t->emits, nullptr);
    EXPECT_NE(t->emit_onnx, nullptr);
    ASSERT_NE(t->example, nullptr) << "every layer type needs an example model file (layer_type.h)";
    EXPECT_EQ(find_layer_type(t->name), t);
  }
  EXPECT_EQ(find_layer_type("repeat"), nullptr);  // a block of the file's structure, not a type
}

TEST(LayerTypes, EveryTypeAndParameterIsInModelsMd) {
  const std::string doc = read_text(MIXPREC_SOURCE_DIR "/docs/models.md");
  ASSERT_FALSE(doc.empty());
  for (const LayerType* t : layer_types()) {
    EXPECT_NE(doc.find("`" + std::string(t->name) + "`"), std::string::npos) << t->name << " is not in docs/models.md";
    for (const LayerParam& p : t->params)
      EXPECT_NE(doc.find("`" + std::string(p.name) + "`"), std::string::npos)
          << t->name << "'s parameter " << p.name << " is not in docs/models.md";
  }
}

TEST(LayerTypes, EveryExamplePlansBuildsRunsAndIsItsTypesToExport) {
  for (const LayerType* t : layer_types()) {
    SCOPED_TRACE(std::string(t->name) + ": " + t->example);
    auto e = build_example(*t);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    bool listed = false;
    for (const ModelFileLayer& r : e->rows) listed |= r.type == t->name;
    EXPECT_TRUE(listed) << "no summary row of this type";
    NoGradGuard no_grad;
    e->model->eval();
    const Tensor out = (*e->model)(e->input);
    EXPECT_EQ(out.size(0), 2);
    // The exporter's input: [B, C, H, W] images or [B, T] ids.
    EXPECT_GE(claimed_by(*e->model, *t, int(e->input.dim())), 1) << "the exporter does not find this type's module";
  }
}

TEST(LayerTypes, UnknownTypesAndParametersListTheTable) {
  auto m = build_model_file("layers: [conv2e: {out: 3}]", "t.yaml", 1, 4, 4, 3);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().message().rfind("t.yaml:1:", 0), 0u) << m.status().message();
  EXPECT_NE(m.status().message().find("unknown layer type 'conv2e' (did you mean 'conv2d'?) (expected one of: conv2d, "),
            std::string::npos)
      << m.status().message();
  for (const LayerType* t : layer_types())
    EXPECT_NE(m.status().message().find(t->name), std::string::npos) << t->name;
  m = build_model_file("layers: [linear: {out: 3, biass: true}]", "t.yaml", 4, 1, 1, 3);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("linear has no parameter 'biass' (did you mean 'bias'?) (it takes: out, bias)"),
            std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace mixprec::nn
