// layer_types_dense.cpp: the layer types of any shape (layer_type.h): linear, layernorm,
// dropout, relu, gelu, the residual block and prelu. Each entry: its parameters, its plan (shapes,
// parameter count, errors), its module, its ONNX nodes, its summary row.
#include <cmath>
#include <string>

#include "mixprec/core/names.h"
#include "nn/layer_type.h"
#include "nn/model_planner.h"

namespace mixprec::nn {
namespace {

using plan_detail::kMaxWidth;
using plan_detail::Planner;
using plan_detail::product;
using plan_detail::shape_text;
using Shape_ = std::vector<int64_t>;

// ---- linear: [F] -> [out]
Status plan_linear(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  if (shape.size() != 1)
    return pl.error(a.at, "linear takes flat features [F]; its input here is " + shape_text(shape) +
                              ": put flatten or global_avgpool before it");
  MIXPREC_TAKE(out, pl.integer(a.p, "out", a.at, std::nullopt, 1, kMaxWidth));
  MIXPREC_TAKE(bias, pl.boolean(a.p, "bias", a.at, true));
  if (shape[0] > pl.max_parameters() / out)  // the product could overflow
    return pl.error(a.at, "linear: " + std::to_string(shape[0]) + " x " + std::to_string(out) + " weights is too many");
  m.parameters = shape[0] * out + (bias ? out : 0);
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = shape[0], m.out = out, m.bias = bias;
  shape = {out};
  return Status::ok();
}

const LayerType linear_type{
    .name = "linear",
    .params = {{"out", LayerParam::integer}, {"bias", LayerParam::boolean}},
    .plan = plan_linear,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<Linear>(p.in, p.out, p.bias);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const Linear*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return onnx_linear(static_cast<const Linear&>(m), w, path, x);
    }),
    .output_op = amp::OpId::linear,
    .example = "layers: [flatten, linear: {out: 5, bias: false}, linear: {out: classes}]",
};

// ---- layernorm: [F] or each position of [T, E]
Status plan_layernorm(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  if (shape.size() != 1 && shape.size() != 2)
    return pl.error(a.at, "layernorm normalises flat features [F] or each position of a sequence [T, E]; its input "
                          "here is " + shape_text(shape));
  MIXPREC_TAKE(eps, pl.number(a.p, "eps", a.at, 1e-5, 1e-12, 1.0, false));
  m.parameters = 2 * shape.back();
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = shape.back(), m.eps = eps;
  return Status::ok();
}

const LayerType layernorm_type{
    .name = "layernorm",
    .params = {{"eps", LayerParam::number}},
    .plan = plan_layernorm,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<LayerNorm>(Shape{p.in}, p.eps);  // the last dim
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const LayerNorm*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return onnx_layer_norm(static_cast<const LayerNorm&>(m), w, path, x);
    }),
    .output_op = amp::OpId::layer_norm,
    .normalization = true,
    .per_position = true,
    .kept_activations = [](const LayerPlan& p) { return 2 * double(product(p.output_shape)); },  // and x-hat
    .example = "layers: [flatten, layernorm, linear: {out: classes}]",
};

// ---- dropout: any shape; the identity in eval mode (and so in ONNX)
const LayerType dropout_type{
    .name = "dropout",
    .params = {{"p", LayerParam::number}},
    .plan = [](Planner& pl, const LayerArgs& a, Shape_&, LayerPlan& m) -> Status {
      MIXPREC_TAKE(prob, pl.number(a.p, "p", a.at, 0.5, 0.0, 1.0, true));
      m.p = prob;
      return Status::ok();
    },
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> { return std::make_shared<Dropout>(p.p); }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const Dropout*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module&, OnnxWriter&, const std::string&, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return x;
    }),
    .output_op = amp::OpId::dropout,
    .per_position = true,
    .kept_activations = [](const LayerPlan& p) { return 2 * double(product(p.output_shape)); },  // and its mask
    .example = "layers: [flatten, dropout: {p: 0.3}, linear: {out: classes}]",
};

// ---- relu, gelu: any shape
Status plan_nothing(Planner&, const LayerArgs&, Shape_&, LayerPlan&) { return Status::ok(); }

const LayerType relu_type{
    .name = "relu",
    .params = {},
    .plan = plan_nothing,
    .build = MIXPREC_MODULE_PART([](const LayerPlan&, BuildState&) -> std::shared_ptr<Module> { return std::make_shared<ReLU>(); }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const ReLU*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module&, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return onnx_relu(w, x, path);
    }),
    .output_op = amp::OpId::relu,
    .per_position = true,
    .example = "layers: [flatten, relu, linear: {out: classes}]",
};

const LayerType gelu_type{
    .name = "gelu",
    .params = {},
    .plan = plan_nothing,
    .build = MIXPREC_MODULE_PART([](const LayerPlan&, BuildState&) -> std::shared_ptr<Module> { return std::make_shared<GELU>(); }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const GELU*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module&, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return onnx_gelu(w, x, path);
    }),
    .output_op = amp::OpId::gelu,
    .per_position = true,
    .example = "layers: [flatten, gelu, linear: {out: classes}]",
};

// ---- prelu: any shape; x for x > 0, a x otherwise, one slope a or one per channel (dim 0 of a
// sample: an image's or a sequence's channels, a table's features)
Status plan_prelu(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  const int64_t channels = shape.empty() ? 1 : shape[0];
  MIXPREC_TAKE(n, pl.integer(a.p, "num_parameters", a.at, 1, 1, kMaxWidth));
  if (n != 1 && n != channels)
    return pl.error(a.at + "/num_parameters", "num_parameters: " + std::to_string(n) + ", but the input " +
                                                  shape_text(shape) + " has " + std::to_string(channels) +
                                                  " channels (1: one slope for all, or one per channel)");
  MIXPREC_TAKE(init, pl.number(a.p, "init", a.at, 0.25, -1000.0, 1000.0, false));
  m.parameters = n;
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = n, m.p = init;
  return Status::ok();
}

const LayerType prelu_type{
    .name = "prelu",
    .params = {{"num_parameters", LayerParam::integer}, {"init", LayerParam::number}},
    .plan = plan_prelu,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<PReLU>(p.in, p.p);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const PReLU*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& module, OnnxWriter& w, const std::string& path,
                                        const OnnxValue& x) -> StatusOr<OnnxValue> {
      // PRelu broadcasts its slope from the right: one per channel is [C, 1, ...] over
      // [B, C, ...] (x's rank less the batch and the channel dims as trailing ones).
      const auto& m = static_cast<const PReLU&>(module);
      Shape slope{m.weight.size(0)};
      if (m.weight.size(0) > 1)
        for (int i = 2; i < x.rank; ++i) slope.push_back(1);
      const std::string a = w.weight(onnx_join(path, "weight"), m.weight.reshape(slope));
      return OnnxValue{w.node("PRelu", {x.name, a}, onnx_join(path, "out")), x.rank};
    }),
    .output_op = amp::OpId::prelu,
    .example = "layers: [prelu: {num_parameters: 2, init: 0.1}, flatten, prelu, linear: {out: classes}]",
};

// ---- residual: [layers] is x + f(x); {layers: [...], shortcut: [...]} is g(x) + f(x), a
// projection shortcut (ResNet's 1x1 conv + batch norm when the shape changes), planned from
// the same input.
Status plan_residual(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  const Shape_ in = shape;
  nlohmann::json body = a.raw, shortcut;
  std::string body_at = a.at;
  if (a.raw.is_object()) {
    for (auto it = a.raw.begin(); it != a.raw.end(); ++it)
      if (it.key() != "layers" && it.key() != "shortcut")
        return pl.error(a.at + "/" + it.key(), "'" + it.key() + "' in a residual block" +
                                                   did_you_mean(it.key(), {"layers", "shortcut"}) +
                                                   " (expected layers: [...] and optionally shortcut: [...])");
    if (!a.raw.contains("layers")) return pl.error(a.at, "a residual block needs layers: [...]");
    body = a.raw["layers"];
    body_at = a.at + "/layers";
    if (a.raw.contains("shortcut")) shortcut = a.raw["shortcut"];
  }
  MIXPREC_RETURN_IF_ERROR(pl.block(body, body_at, m.body, shape, a.full + ".body", a.nesting + 1));
  Shape_ other = in;
  if (!shortcut.is_null())
    MIXPREC_RETURN_IF_ERROR(pl.block(shortcut, a.at + "/shortcut", m.shortcut, other, a.full + ".shortcut", a.nesting + 1));
  if (shape != other)
    return pl.error(a.entry_at, "residual block '" + a.full + "': its layers turn " + shape_text(in) + " into " +
                                    shape_text(shape) +
                                    (shortcut.is_null()
                                         ? "; x + f(x) needs f(x) of x's shape (or a shortcut: [...] that gives " +
                                               shape_text(shape) + ")"
                                         : " but its shortcut into " + shape_text(other) +
                                               "; shortcut(x) + f(x) needs both of one shape"));
  for (const LayerPlan& b : m.body) m.parameters += b.parameters;
  for (const LayerPlan& b : m.shortcut) m.parameters += b.parameters;
  return Status::ok();
}

const LayerType residual_type{
    .name = "residual",
    .params = {},
    .plan = plan_residual,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState& state) -> std::shared_ptr<Module> {
      return std::make_shared<Residual>(build_block(p.body, state),
                                        p.shortcut.empty() ? nullptr : build_block(p.shortcut, state));
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const Residual*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      const auto& r = static_cast<const Residual&>(m);
      auto body = w.module(*r.body, onnx_join(path, "body"), x);
      if (!body.is_ok()) return body.status();
      if (!r.shortcut) return onnx_add(w, x, *body, path);
      auto shortcut = w.module(*r.shortcut, onnx_join(path, "shortcut"), x);
      if (!shortcut.is_ok()) return shortcut.status();
      return onnx_add(w, *shortcut, *body, path);
    }),
    .output_op = amp::OpId::add,
    .autocast_why = "x + f(x): the wider of the two",
    .block = true,
    .example = "layers: [residual: {layers: [conv2d: {out: 3, padding: 1}, relu], shortcut: [conv2d: {out: 3, kernel: 1}]}, residual: [relu], global_avgpool, linear: {out: classes}]",
};

#undef MIXPREC_TAKE

}  // namespace

#ifndef MIXPREC_LAYER_PLAN_ONLY
OnnxValue onnx_linear(const Linear& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) {
  if (x.rank == 2) {  // Gemm: x W^T + b, the weight as stored ([out, in], transB)
    std::vector<std::string> in{x.name, w.weight(onnx_join(path, "weight"), m.weight)};
    if (m.bias.defined()) in.push_back(w.weight(onnx_join(path, "bias"), m.bias));
    return {w.node("Gemm", in, onnx_join(path, "out"), {{"transB", int64_t(1)}}), 2};
  }
  // Token layers [B, S, in]: MatMul broadcasts over the leading dims, Gemm does not.
  std::string y = w.node("MatMul", {x.name, w.weight(onnx_join(path, "weight"), m.weight, /*transpose=*/true)},
                         onnx_join(path, "matmul"));
  if (m.bias.defined()) y = w.node("Add", {y, w.weight(onnx_join(path, "bias"), m.bias)}, onnx_join(path, "out"));
  return {y, x.rank};
}

OnnxValue onnx_layer_norm(const LayerNorm& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) {
  // f32 statistics and f32 parameters under every precision (the O2 presets keep them).
  const int64_t dims = int64_t(m.normalized_shape.size());
  int64_t n = 1;
  for (int64_t d : m.normalized_shape) n *= d;
  const std::string scale =
      m.weight.defined() ? w.weight_f32(onnx_join(path, "weight"), m.weight)
                         : w.constant_f32(onnx_join(path, "ones"), std::vector<float>(size_t(n), 1.0f), m.normalized_shape);
  std::vector<std::string> in{w.to_f32(x.name), scale};
  if (m.bias.defined()) in.push_back(w.weight_f32(onnx_join(path, "bias"), m.bias));
  const std::string y = w.node("LayerNormalization", in, onnx_join(path, "out"), {{"axis", -dims}, {"epsilon", float(m.eps)}});
  return {w.to_compute(y), x.rank};
}

OnnxValue onnx_relu(OnnxWriter& w, const OnnxValue& x, const std::string& path) {
  return {w.node("Relu", {x.name}, path), x.rank};
}

OnnxValue onnx_gelu(OnnxWriter& w, const OnnxValue& x, const std::string& path) {
  // Exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)): opset 17 has no Gelu op. In f32, as
  // mixprec's kernel evaluates it, rounded once to the compute dtype at the end.
  const std::string x32 = w.to_f32(x.name);
  const std::string scaled =
      w.node("Mul", {x32, w.constant_f32("inv_sqrt2", {float(1.0 / std::sqrt(2.0))}, {})}, path + "_scaled");
  const std::string erf1 =
      w.node("Add", {w.node("Erf", {scaled}, path + "_erf"), w.constant_f32("one", {1.0f}, {})}, path + "_erf1");
  const std::string half = w.node("Mul", {x32, w.constant_f32("half", {0.5f}, {})}, path + "_half");
  return {w.to_compute(w.node("Mul", {half, erf1}, path)), x.rank};
}

OnnxValue onnx_add(OnnxWriter& w, const OnnxValue& a, const OnnxValue& b, const std::string& path) {
  return {w.node("Add", {a.name, b.name}, onnx_join(path, "add")), a.rank};
}

#endif  // MIXPREC_LAYER_PLAN_ONLY

std::vector<const LayerType*> dense_layer_types() {
  return {&linear_type, &layernorm_type, &dropout_type, &relu_type, &gelu_type, &residual_type, &prelu_type};
}

}  // namespace mixprec::nn
