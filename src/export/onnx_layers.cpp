// export/onnx_layers.cpp: see onnx_layers.h. A model file's layer is written by its layer
// type's entry (nn::layer_type_of); the built-in models are composed of the same entries'
// functions. Where mixprec computes in f32 whatever the preset (normalisation, softmax, GELU's
// erf), the fp16 graph casts to f32 and back around the same step.
#include "export/onnx_layers.h"

#include "mixprec/nn/nn_attention.h"
#include "nn/layer_type.h"
#include "nn/text_classifier.h"

namespace mixprec::onnx_export {

using onnx::TensorProto;
using nn::onnx_join;

StatusOr<Value> LayerEmitter::module(const nn::Module& m, const std::string& path, const Value& x) {
  // A module with autocast off (a model file's `precision: fp32`) runs in f32 with f32
  // weights, its input cast up and its output back, as Module::operator() runs it.
  if (m.autocast_override() == std::optional<bool>(false) && !g_.in_f32_island()) {
    const Value up{g_.to_f32(x.name), x.rank};
    g_.set_f32_island(true);
    auto out = dispatch(m, path, up);
    g_.set_f32_island(false);
    if (!out.is_ok()) return out.status();
    return Value{g_.to_compute(out->name), out->rank};
  }
  return dispatch(m, path, x);
}

StatusOr<Value> LayerEmitter::dispatch(const nn::Module& m, const std::string& path, const Value& x) {
  if (dynamic_cast<const nn::FileTextClassifier*>(&m)) return text_classifier(m, path, x);  // a Sequential too
  if (const nn::LayerType* t = nn::layer_type_of(m, x)) return t->emit_onnx(m, *this, path, x);
  if (dynamic_cast<const nn::Sequential*>(&m)) return sequence(m, path, x);
  if (auto* a = dynamic_cast<const nn::MultiheadAttention*>(&m)) return nn::onnx_attention(*a, *this, path, x);
  if (auto* b = dynamic_cast<const nn::BasicBlock*>(&m)) return basic_block(*b, path, x);
  if (auto* mlp = dynamic_cast<const nn::GptMlp*>(&m)) {
    const Value h = nn::onnx_gelu(*this, nn::onnx_linear(*mlp->c_fc, *this, onnx_join(path, "c_fc"), x), onnx_join(path, "gelu"));
    return nn::onnx_linear(*mlp->c_proj, *this, onnx_join(path, "c_proj"), h);
  }
  if (auto* cnn = dynamic_cast<const nn::Cnn*>(&m)) {
    Value y = nn::onnx_max_pool(*this, nn::onnx_relu(*this, nn::onnx_conv2d(*cnn->conv1, *this, "conv1", x), "relu1"), 2, 2, 0,
                                "pool1");
    y = nn::onnx_max_pool(*this, nn::onnx_relu(*this, nn::onnx_conv2d(*cnn->conv2, *this, "conv2", y), "relu2"), 2, 2, 0,
                          "pool2");
    y = nn::onnx_relu(*this, nn::onnx_linear(*cnn->fc1, *this, "fc1", nn::onnx_flatten(*this, y, "flatten")), "relu3");
    return nn::onnx_linear(*cnn->fc2, *this, "fc2", y);
  }
  if (auto* mlp = dynamic_cast<const nn::Mlp*>(&m)) {
    Value y = x.rank == 2 ? x : nn::onnx_flatten(*this, x, "flatten");
    y = nn::onnx_relu(*this, nn::onnx_linear(*mlp->fc1, *this, "fc1", y), "relu1");
    y = nn::onnx_relu(*this, nn::onnx_linear(*mlp->fc2, *this, "fc2", y), "relu2");
    return nn::onnx_linear(*mlp->fc3, *this, "fc3", y);
  }
  if (auto* t = dynamic_cast<const nn::TransformerClassifier*>(&m)) {
    // [B, 1, S, W] -> [B, S, W] tokens -> encoder -> mean over S -> fc.
    Value y{g_.node("Reshape", {x.name, g_.ints("tokens_shape", {0, t->seq, t->features})}, "tokens"), 3};
    if (t->input_proj) y = nn::onnx_linear(*t->input_proj, *this, "input_proj", y);
    auto encoded = module(*t->encoder, "encoder", y);
    if (!encoded.is_ok()) return encoded.status();
    const Value pooled{
        g_.node("ReduceMean", {encoded->name}, "pooled", {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}), 2};
    return nn::onnx_linear(*t->fc, *this, "fc", pooled);
  }
  if (auto* r = dynamic_cast<const nn::ResNet*>(&m)) {
    Value y = nn::onnx_relu(
        *this, nn::onnx_batch_norm(*r->bn1, *this, "bn1", nn::onnx_conv2d(*r->conv1, *this, "conv1", x)), "relu");
    for (const auto& [name, stage] : {std::pair{"layer1", r->layer1}, {"layer2", r->layer2}, {"layer3", r->layer3}}) {
      auto out = sequence(*stage, name, y);
      if (!out.is_ok()) return out.status();
      y = *out;
    }
    const std::string pooled = g_.node("GlobalAveragePool", {y.name}, "avgpool");
    return nn::onnx_linear(*r->fc, *this, "fc", Value{g_.node("Flatten", {pooled}, "pooled", {{"axis", int64_t(1)}}), 2});
  }
  if (auto* gpt_model = dynamic_cast<const nn::Gpt*>(&m)) return gpt(*gpt_model, x);
  std::string known;
  for (const nn::LayerType* t : nn::layer_types()) known += std::string(", ") + t->name;
  return Status::unimplemented("ONNX export: module '" + (path.empty() ? std::string("(the model)") : path) +
                               "' is a " + m.type_name() +
                               ", which the exporter does not know (it exports the built-in models, Sequential and "
                               "the model-file layer types: " + known.substr(2) + ")");
}

StatusOr<Value> LayerEmitter::sequence(const nn::Module& m, const std::string& path, Value x) {
  for (const auto& [name, child] : m.children()) {
    auto out = module(*child, onnx_join(path, name), x);
    if (!out.is_ok()) return out.status();
    x = *out;
  }
  return x;
}

Value LayerEmitter::basic_block(const nn::BasicBlock& m, const std::string& path, const Value& x) {
  Value y = nn::onnx_relu(*this,
                          nn::onnx_batch_norm(*m.bn1, *this, onnx_join(path, "bn1"),
                                              nn::onnx_conv2d(*m.conv1, *this, onnx_join(path, "conv1"), x)),
                          onnx_join(path, "relu1"));
  y = nn::onnx_batch_norm(*m.bn2, *this, onnx_join(path, "bn2"), nn::onnx_conv2d(*m.conv2, *this, onnx_join(path, "conv2"), y));
  Value shortcut = x;
  if (m.downsample) {
    const auto& kids = m.downsample->children();
    shortcut = nn::onnx_conv2d(static_cast<const nn::Conv2d&>(*kids.at(0).second), *this, onnx_join(path, "downsample.0"), x);
    shortcut = nn::onnx_batch_norm(static_cast<const nn::BatchNorm2d&>(*kids.at(1).second), *this,
                                   onnx_join(path, "downsample.1"), shortcut);
  }
  return nn::onnx_relu(*this, nn::onnx_add(*this, y, shortcut, path), onnx_join(path, "relu2"));
}

StatusOr<Value> LayerEmitter::gpt(const nn::Gpt& m, const Value& tokens) {
  // tokens [B, T] i64 -> wte[tokens] + wpe[0..T) -> blocks (the decoder layer type's) ->
  // ln_f -> x wte^T (weight tying: the head reads the same initializer as the lookup,
  // transposed by a node).
  causal_context = m.context;
  const std::string wte = g_.weight("wte.weight", m.wte->weight);
  const std::string tok = g_.node("Gather", {wte, tokens.name}, "tok_emb", {{"axis", int64_t(0)}});
  const std::string t = g_.node("Shape", {tokens.name}, "seq_len", {{"start", int64_t(1)}, {"end", int64_t(2)}});
  const std::string pos = g_.node("Slice", {g_.weight("wpe.weight", m.wpe->weight), g_.ints("pos_start", {0}), t}, "pos_emb");
  Value x{g_.node("Add", {tok, pos}, "embedded"), 3};
  for (const auto& [name, block] : m.h->children()) {
    auto out = module(*block, "h." + name, x);
    if (!out.is_ok()) return out.status();
    x = *out;
  }
  x = nn::onnx_layer_norm(*m.ln_f, *this, "ln_f", x);
  const std::string head = g_.node("Transpose", {wte}, "wte_t", {{"perm", std::vector<int64_t>{1, 0}}});
  return Value{g_.node("MatMul", {x.name, head}, "head"), 3};
}

StatusOr<Value> LayerEmitter::text_classifier(const nn::Module& m, const std::string& path, const Value& ids) {
  // keep [B, S]: 1 at a text's bytes, 0 at its padding (byte 0), as nn::padding_weights reads it.
  const std::string nonzero = g_.node("Cast", {ids.name}, onnx_join(path, "nonpadding"), {{"to", int64_t(TensorProto::BOOL)}});
  const std::string keep = g_.node("Cast", {nonzero}, onnx_join(path, "keep"), {{"to", int64_t(TensorProto::FLOAT)}});
  // (keep - 1) x -kPaddingScore: 0, or kPaddingScore at padding; [B, 1, 1, S] over the scores.
  const std::string off =
      g_.node("Sub", {keep, g_.constant_f32(onnx_join(path, "one"), {1.0f}, {})}, onnx_join(path, "keep_minus_one"));
  const std::string mask = g_.node(
      "Mul", {off, g_.constant_f32(onnx_join(path, "padding_score"), {float(-nn::kPaddingScore)}, {})},
      onnx_join(path, "key_mask_flat"));
  key_mask = g_.node("Reshape", {mask, g_.ints(onnx_join(path, "key_mask_shape"), {0, 1, 1, -1})}, onnx_join(path, "key_mask"));
  // Pooling weights keep / count, count = keep . keep (0/1 values); a text of padding only
  // gets 0 weights (0 / tiny), as padding_weights gives.
  const std::string keep3 = g_.node("Reshape", {keep, g_.ints(onnx_join(path, "keep_shape"), {0, 1, -1})}, onnx_join(path, "keep3"));
  const std::string keep3_t =
      g_.node("Transpose", {keep3}, onnx_join(path, "keep3_t"), {{"perm", std::vector<int64_t>{0, 2, 1}}});
  const std::string count = g_.node("MatMul", {keep3, keep3_t}, onnx_join(path, "count"));  // [B, 1, 1]
  const std::string safe =
      g_.node("Add", {count, g_.constant_f32(onnx_join(path, "tiny"), {1e-30f}, {})}, onnx_join(path, "count_safe"));
  pool_weights = g_.node("Div", {keep3, safe}, onnx_join(path, "pool_weights"));
  auto out = sequence(m, path, ids);
  key_mask.clear();
  pool_weights.clear();
  return out;
}

}  // namespace mixprec::onnx_export
