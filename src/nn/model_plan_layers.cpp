// model_plan_layers.cpp: each layer type of a model file (model_plan.h): its parameters
// with their defaults and ranges, the input shape it takes, the shape it gives and its
// parameter count, checked before anything is built.
#include <cmath>
#include <string>

#include "nn/model_planner.h"

namespace mixprec::nn::plan_detail {

const std::vector<LayerType>& layer_types() {
  static const std::vector<LayerType> types = {
      {"conv2d", {{"out", Param::integer}, {"kernel", Param::integer}, {"stride", Param::integer},
                  {"padding", Param::integer}, {"bias", Param::boolean}}},
      {"linear", {{"out", Param::integer}, {"bias", Param::boolean}}},
      {"maxpool2d", {{"kernel", Param::integer}, {"stride", Param::integer}, {"padding", Param::integer}}},
      {"batchnorm2d", {{"eps", Param::number}, {"momentum", Param::number}}},
      {"layernorm", {{"eps", Param::number}}},
      {"dropout", {{"p", Param::number}}},
      {"relu", {}},
      {"gelu", {}},
      {"flatten", {}},
      {"sequence", {}},
      {"global_avgpool", {}},
      {"residual", {}},
      {"embedding", {{"dim", Param::integer}, {"context", Param::integer}, {"mask_padding", Param::boolean}}},
      {"encoder", {{"heads", Param::integer}, {"ffn", Param::integer}, {"dropout", Param::number},
                   {"eps", Param::number}}},
      {"decoder", {{"heads", Param::integer}}},
      {"lm_head", {{"tied", Param::boolean}}},
  };
  return types;
}


// An integer parameter: given, "classes" (for out), or its default; in [lo, hi].
StatusOr<int64_t> Planner::integer(const std::map<std::string, json>& p, const char* key, const std::string& at,
                          std::optional<int64_t> fallback, int64_t lo, int64_t hi) {
  auto it = p.find(key);
  if (it == p.end()) {
    if (fallback) return *fallback;
    return error(at, std::string("needs ") + key + ": N" + (std::string(key) == "out" ? " (or classes)" : ""));
  }
  const json& v = it->second;
  if (std::string(key) == "out" && v.is_string() && v == "classes") return classes_;
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    return error(at + "/" + key, std::string(key) + ": expected an integer in " + std::to_string(lo) + ".." +
                                     std::to_string(hi) + (std::string(key) == "out" ? " or classes" : "") +
                                     ", got " + v.dump().substr(0, 40));
  return v.get<int64_t>();
}

StatusOr<double> Planner::number(const std::map<std::string, json>& p, const char* key, const std::string& at, double fallback,
                        double lo, double hi, bool hi_open) {
  auto it = p.find(key);
  if (it == p.end()) return fallback;
  const json& v = it->second;
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= lo &&
                  (hi_open ? v.get<double>() < hi : v.get<double>() <= hi);
  if (!ok)
    return error(at + "/" + key, std::string(key) + ": expected a number in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + (hi_open ? ")" : "]") + ", got " + v.dump().substr(0, 40));
  return v.get<double>();
}

StatusOr<bool> Planner::boolean(const std::map<std::string, json>& p, const char* key, const std::string& at, bool fallback) {
  auto it = p.find(key);
  if (it == p.end()) return fallback;
  if (!it->second.is_boolean()) return error(at + "/" + key, std::string(key) + ": expected true or false");
  return it->second.get<bool>();
}

// Counts a layer's parameters against the budget before the layer allocates them.
Status Planner::budget(const std::string& at, int64_t layer_parameters) {
  if (layer_parameters > max_parameters_ - parameters_)
    return error(at, "the model would pass " + std::to_string(max_parameters_) + " parameters (this layer has " +
                         std::to_string(layer_parameters) + ")");
  parameters_ += layer_parameters;
  return Status::ok();
}

Status Planner::needs_image(const std::string& type, const std::string& at, const std::vector<int64_t>& shape) {
  if (shape.size() == 3) return Status::ok();
  return error(at, type + " takes images [C, H, W]; its input here is " + shape_text(shape));
}

Status Planner::fits_language_model(const std::string& type, const std::string& at) {
  if (ended_) return error(at, type + " after lm_head: lm_head is a language model's last layer");
  if (!language_model_) {
    if (type == "lm_head")
      return error(at, "lm_head ends a language model: it must be the file's last layer (a classifier ends in "
                       "[classes], e.g. global_avgpool then linear: {out: classes})");
    return Status::ok();
  }
  static const char* const per_position[] = {"embedding", "decoder", "layernorm", "gelu", "relu", "dropout", "lm_head"};
  for (const char* t : per_position)
    if (type == t) return Status::ok();
  return error(at, type + " in a language model (a file ending in lm_head): each position may only see itself and "
                          "the ones before it, so its layers are embedding, decoder (causal attention), layernorm, "
                          "gelu, relu, dropout and lm_head" +
                          std::string(type == "encoder" ? "; encoder attends to later positions too: use decoder" : ""));
}

Status Planner::make_layer(const std::string& type, const std::map<std::string, json>& p, const std::string& at,
                  std::vector<int64_t>& shape, LayerPlan& m) {
#define MIXPREC_TAKE(var, expr)          \
auto var##_or = (expr);                \
if (!var##_or.is_ok()) return var##_or.status(); \
const auto var = *var##_or
  MIXPREC_RETURN_IF_ERROR(fits_language_model(type, at));
  if (ids_ && type != "embedding")
    return error(at, type + ": the input is text as byte ids " + shape_text(shape) +
                         "; a text classifier or language model starts with embedding: {dim: N}");
  if (!ids_ && type == "embedding")
    return error(at, "embedding takes byte ids (--dataset csv --text-column NAME); its input here is " +
                         shape_text(shape));
  if (type == "conv2d") {
    MIXPREC_RETURN_IF_ERROR(needs_image(type, at, shape));
    MIXPREC_TAKE(out, integer(p, "out", at, std::nullopt, 1, kMaxWidth));
    MIXPREC_TAKE(k, integer(p, "kernel", at, 3, 1, kMaxKernel));
    MIXPREC_TAKE(s, integer(p, "stride", at, 1, 1, kMaxKernel));
    MIXPREC_TAKE(pad, integer(p, "padding", at, 0, 0, kMaxKernel));
    MIXPREC_TAKE(bias, boolean(p, "bias", at, true));
    const int64_t h = (shape[1] + 2 * pad - k) / s + 1, w = (shape[2] + 2 * pad - k) / s + 1;
    if (shape[1] + 2 * pad < k || shape[2] + 2 * pad < k)
      return error(at, "conv2d: a " + std::to_string(k) + "x" + std::to_string(k) + " kernel does not fit the input " +
                           shape_text(shape) + " with padding " + std::to_string(pad));
    // Each factor is at most 65536 or 64: the product fits int64 exactly.
    m.parameters = out * shape[0] * k * k + (bias ? out : 0);
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = shape[0], m.out = out, m.kernel = k, m.stride = s, m.padding = pad, m.bias = bias;
    shape = {out, h, w};
  } else if (type == "linear") {
    if (shape.size() != 1)
      return error(at, "linear takes flat features [F]; its input here is " + shape_text(shape) +
                           ": put flatten or global_avgpool before it");
    MIXPREC_TAKE(out, integer(p, "out", at, std::nullopt, 1, kMaxWidth));
    MIXPREC_TAKE(bias, boolean(p, "bias", at, true));
    if (shape[0] > max_parameters_ / out)  // the product could overflow
      return error(at, "linear: " + std::to_string(shape[0]) + " x " + std::to_string(out) + " weights is too many");
    m.parameters = shape[0] * out + (bias ? out : 0);
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = shape[0], m.out = out, m.bias = bias;
    shape = {out};
  } else if (type == "maxpool2d") {
    MIXPREC_RETURN_IF_ERROR(needs_image(type, at, shape));
    MIXPREC_TAKE(k, integer(p, "kernel", at, 2, 1, kMaxKernel));
    MIXPREC_TAKE(s, integer(p, "stride", at, k, 1, kMaxKernel));
    MIXPREC_TAKE(pad, integer(p, "padding", at, 0, 0, k / 2));
    if (shape[1] + 2 * pad < k || shape[2] + 2 * pad < k)
      return error(at, "maxpool2d: a " + std::to_string(k) + "x" + std::to_string(k) + " window does not fit the input " +
                           shape_text(shape));
    m.kernel = k, m.stride = s, m.padding = pad;
    shape = {shape[0], (shape[1] + 2 * pad - k) / s + 1, (shape[2] + 2 * pad - k) / s + 1};
  } else if (type == "batchnorm2d") {
    MIXPREC_RETURN_IF_ERROR(needs_image(type, at, shape));
    MIXPREC_TAKE(eps, number(p, "eps", at, 1e-5, 1e-12, 1.0, false));
    MIXPREC_TAKE(momentum, number(p, "momentum", at, 0.1, 0.0, 1.0, false));
    MIXPREC_RETURN_IF_ERROR(budget(at, 4 * shape[0]));  // weight, bias and the two running statistics
    m.parameters = 2 * shape[0];
    m.in = shape[0], m.eps = eps, m.momentum = momentum;
  } else if (type == "layernorm") {
    if (shape.size() != 1 && shape.size() != 2)
      return error(at, "layernorm normalises flat features [F] or each position of a sequence [T, E]; its input "
                       "here is " + shape_text(shape));
    MIXPREC_TAKE(eps, number(p, "eps", at, 1e-5, 1e-12, 1.0, false));
    m.parameters = 2 * shape.back();
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = shape.back(), m.eps = eps;
  } else if (type == "dropout") {
    MIXPREC_TAKE(prob, number(p, "p", at, 0.5, 0.0, 1.0, true));
    m.p = prob;
  } else if (type == "sequence") {  // image rows as tokens: [C, H, W] -> [C*H, W]
    MIXPREC_RETURN_IF_ERROR(needs_image(type, at, shape));
    shape = {shape[0] * shape[1], shape[2]};
  } else if (type == "flatten") {
    shape = {product(shape)};  // C <= 65536, H and W < 2^20 even after 4096 padded layers: < 2^56
  } else if (type == "global_avgpool") {
    if (shape.size() == 2) {  // a sequence [T, E]: the mean over its positions
      shape = {shape[1]};
    } else {
      MIXPREC_RETURN_IF_ERROR(needs_image(type, at, shape));
      shape = {shape[0]};
    }
  } else if (type == "embedding") {  // byte ids [T] -> [T, dim]: tokens + learned positions
    MIXPREC_TAKE(dim, integer(p, "dim", at, std::nullopt, 1, kMaxWidth));
    const int64_t T = shape[0];
    // Learned positions: `context` of them (a language model's window), else the input's T.
    MIXPREC_TAKE(context, integer(p, "context", at, T, 1, kMaxWidth));
    if (context < T)
      return error(at + "/context", "context: " + std::to_string(context) + " positions, but the texts here have " +
                                        std::to_string(T) + " bytes (--max-tokens)");
    MIXPREC_TAKE(mask_padding, boolean(p, "mask_padding", at, false));
    if (mask_padding && language_model_)
      return error(at + "/mask_padding", "mask_padding: a language model's windows of text have no padding (it is for "
                                         "text classifiers, whose texts are 0-padded to --max-tokens)");
    m.mask_padding = mask_padding;
    m.parameters = (256 + context) * dim;  // both <= 65536: no overflow
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = context, m.out = dim;
    shape = {T, dim};
    ids_ = false;
    embedding_dim_ = dim;
  } else if (type == "decoder") {  // [T, E] -> [T, E]: GPT-2's pre-norm block, causal attention
    if (shape.size() != 2)
      return error(at, "decoder takes a sequence [T, E] (after an embedding); its input here is " + shape_text(shape));
    const int64_t E = shape[1];
    MIXPREC_TAKE(heads, integer(p, "heads", at, 4, 1, E));
    if (E % heads != 0)
      return error(at + "/heads", "heads: " + std::to_string(heads) + " does not divide the width " +
                                      std::to_string(E) + " (each head gets E / heads values)");
    // Two norms 4E, attention in_proj 3E x E + 3E and out_proj E x E + E, MLP 4E x E + 4E and
    // E x 4E + E. E <= 65536: below 2^56.
    m.parameters = 12 * E * E + 13 * E;
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = E, m.heads = heads;
  } else if (type == "lm_head") {  // [T, E] -> [T, 256]: the next byte's logits at every position
    if (shape.size() != 2)
      return error(at, "lm_head takes a sequence [T, E]; its input here is " + shape_text(shape));
    MIXPREC_TAKE(tied, boolean(p, "tied", at, true));
    const int64_t E = shape[1];
    if (tied && E != embedding_dim_)
      return error(at, "lm_head: tied to the embedding's token table of width " + std::to_string(embedding_dim_) +
                           ", but its input is " + shape_text(shape) + " (tied: false gives it a weight of its own)");
    m.parameters = tied ? 0 : 256 * E;
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = E, m.out = 256, m.tied = tied;
    shape = {shape[0], 256};
    ended_ = true;
  } else if (type == "encoder") {  // [T, E] -> [T, E]: BERT's post-norm transformer encoder layer
    if (shape.size() != 2)
      return error(at, "encoder takes a sequence [T, E] (after an embedding); its input here is " +
                           shape_text(shape));
    const int64_t E = shape[1];
    MIXPREC_TAKE(heads, integer(p, "heads", at, 4, 1, E));
    if (E % heads != 0)
      return error(at + "/heads", "heads: " + std::to_string(heads) + " does not divide the width " +
                                      std::to_string(E) + " (each head gets E / heads values)");
    MIXPREC_TAKE(ffn, integer(p, "ffn", at, 4 * E, 1, kMaxWidth));
    MIXPREC_TAKE(prob, number(p, "dropout", at, 0.1, 0.0, 1.0, true));
    MIXPREC_TAKE(eps, number(p, "eps", at, 1e-5, 1e-12, 1.0, false));
    // in_proj 3E x E + 3E, out_proj E x E + E, linear1 F x E + F, linear2 E x F + E, two norms.
    m.parameters = 4 * E * E + 2 * E * ffn + 9 * E + ffn;
    MIXPREC_RETURN_IF_ERROR(budget(at, m.parameters));
    m.in = E, m.out = ffn, m.heads = heads, m.p = prob, m.eps = eps;
  }
#undef MIXPREC_TAKE
  return Status::ok();
}

}  // namespace mixprec::nn::plan_detail
