// export/onnx_layers.cpp: see onnx_layers.h. Each emitter mirrors its module's forward()
// (src/nn); where mixprec computes in f32 whatever the preset (normalisation, softmax, GELU's
// erf), the fp16 graph casts to f32 and back around the same step.
#include "export/onnx_layers.h"

#include <cmath>
#include <limits>

#include "mixprec/nn_attention.h"
#include "nn/language_model_layers.h"
#include "nn/text_classifier.h"

namespace mixprec::onnx_export {

using onnx::TensorProto;

namespace {

std::string join(const std::string& path, const std::string& child) { return path.empty() ? child : path + "." + child; }

}  // namespace

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
  if (auto* l = dynamic_cast<const nn::Linear*>(&m)) return linear(*l, path, x);
  if (auto* c = dynamic_cast<const nn::Conv2d*>(&m)) return conv(*c, path, x);
  if (dynamic_cast<const nn::ReLU*>(&m)) return relu(x, path);
  if (dynamic_cast<const nn::GELU*>(&m)) return gelu(x, path);
  if (dynamic_cast<const nn::Dropout*>(&m)) return x;  // eval mode: the identity
  if (auto* p = dynamic_cast<const nn::MaxPool2d*>(&m)) return max_pool(x, p->kernel(), p->stride(), p->padding(), path);
  if (auto* f = dynamic_cast<const nn::Flatten*>(&m)) {
    if (f->start_dim() == 1 && f->end_dim() == 2 && x.rank == 4) {
      // A model file's `sequence`: [B, C, H, W] -> [B, C*H, W], the image's rows as tokens;
      // the target shape [B, -1, W] read off the input, so the batch stays dynamic.
      const std::string shape = g_.node("Shape", {x.name}, join(path, "shape"));
      const std::string b = g_.node("Slice", {shape, g_.ints(join(path, "b_from"), {0}), g_.ints(join(path, "b_to"), {1})},
                                    join(path, "batch"));
      const std::string w = g_.node("Slice", {shape, g_.ints(join(path, "w_from"), {3}), g_.ints(join(path, "w_to"), {4})},
                                    join(path, "width"));
      const std::string target = g_.node("Concat", {b, g_.ints(join(path, "rows"), {-1}), w}, join(path, "target"),
                                         {{"axis", int64_t(0)}});
      return Value{g_.node("Reshape", {x.name, target}, join(path, "tokens")), 3};
    }
    if (f->start_dim() != 1 || !(f->end_dim() == -1 || f->end_dim() == x.rank - 1))
      return Status::unimplemented("ONNX export: " + path + " flattens dims " + std::to_string(f->start_dim()) +
                                   ".." + std::to_string(f->end_dim()) + "; only Flatten(1, -1) is exported");
    return flatten(x, path);
  }
  if (dynamic_cast<const nn::GlobalAvgPool*>(&m)) {
    const std::string pooled = g_.node("GlobalAveragePool", {x.name}, join(path, "avgpool"));
    return Value{g_.node("Flatten", {pooled}, join(path, "flat"), {{"axis", int64_t(1)}}), 2};
  }
  if (auto* n = dynamic_cast<const nn::LayerNorm*>(&m)) return layer_norm(*n, path, x);
  if (auto* n = dynamic_cast<const nn::BatchNorm2d*>(&m)) return batch_norm(*n, path, x);
  if (dynamic_cast<const nn::FileTextClassifier*>(&m)) return text_classifier(m, path, x);  // a Sequential too
  if (dynamic_cast<const nn::Sequential*>(&m)) return sequence(m, path, x);
  if (auto* r = dynamic_cast<const nn::Residual*>(&m)) {
    auto body = module(*r->body, join(path, "body"), x);
    if (!body.is_ok()) return body.status();
    if (!r->shortcut) return add(x, *body, path);
    auto shortcut = module(*r->shortcut, join(path, "shortcut"), x);
    if (!shortcut.is_ok()) return shortcut.status();
    return add(*shortcut, *body, path);
  }
  if (auto* a = dynamic_cast<const nn::MultiheadAttention*>(&m)) return attention(*a, path, x);
  if (auto* e = dynamic_cast<const nn::TransformerEncoderLayer*>(&m)) return encoder_layer(*e, path, x);
  if (auto* b = dynamic_cast<const nn::BasicBlock*>(&m)) return basic_block(*b, path, x);
  if (auto* b = dynamic_cast<const nn::GptBlock*>(&m)) return gpt_block(*b, path, x);
  if (auto* mlp = dynamic_cast<const nn::GptMlp*>(&m)) {
    const Value h = gelu(linear(*mlp->c_fc, join(path, "c_fc"), x), join(path, "gelu"));
    return linear(*mlp->c_proj, join(path, "c_proj"), h);
  }
  if (auto* cnn = dynamic_cast<const nn::Cnn*>(&m)) {
    Value y = max_pool(relu(conv(*cnn->conv1, "conv1", x), "relu1"), 2, 2, 0, "pool1");
    y = max_pool(relu(conv(*cnn->conv2, "conv2", y), "relu2"), 2, 2, 0, "pool2");
    y = relu(linear(*cnn->fc1, "fc1", flatten(y, "flatten")), "relu3");
    return linear(*cnn->fc2, "fc2", y);
  }
  if (auto* mlp = dynamic_cast<const nn::Mlp*>(&m)) {
    Value y = x.rank == 2 ? x : flatten(x, "flatten");
    y = relu(linear(*mlp->fc1, "fc1", y), "relu1");
    y = relu(linear(*mlp->fc2, "fc2", y), "relu2");
    return linear(*mlp->fc3, "fc3", y);
  }
  if (auto* t = dynamic_cast<const nn::TransformerClassifier*>(&m)) {
    // [B, 1, S, W] -> [B, S, W] tokens -> encoder -> mean over S -> fc.
    Value y{g_.node("Reshape", {x.name, g_.ints("tokens_shape", {0, t->seq, t->features})}, "tokens"), 3};
    if (t->input_proj) y = linear(*t->input_proj, "input_proj", y);
    auto encoded = module(*t->encoder, "encoder", y);
    if (!encoded.is_ok()) return encoded.status();
    const Value pooled{g_.node("ReduceMean", {encoded->name}, "pooled", {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}), 2};
    return linear(*t->fc, "fc", pooled);
  }
  if (auto* r = dynamic_cast<const nn::ResNet*>(&m)) {
    Value y = relu(batch_norm(*r->bn1, "bn1", conv(*r->conv1, "conv1", x)), "relu");
    for (const auto& [name, stage] : {std::pair{"layer1", r->layer1}, {"layer2", r->layer2}, {"layer3", r->layer3}}) {
      auto out = sequence(*stage, name, y);
      if (!out.is_ok()) return out.status();
      y = *out;
    }
    const std::string pooled = g_.node("GlobalAveragePool", {y.name}, "avgpool");
    return linear(*r->fc, "fc", Value{g_.node("Flatten", {pooled}, "pooled", {{"axis", int64_t(1)}}), 2});
  }
  if (auto* gpt_model = dynamic_cast<const nn::Gpt*>(&m)) return gpt(*gpt_model, x);
  if (auto* e = dynamic_cast<const nn::TokenEmbedding*>(&m)) return token_embedding(*e, path, x);
  if (dynamic_cast<const nn::SequenceMeanPool*>(&m)) {  // [B, T, E] -> [B, E], as mean_over_positions
    if (pool_weights_.empty())
      return Value{g_.node("ReduceMean", {x.name}, join(path, "mean"), {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}), 2};
    // The masked mean: [B, 1, S] weights x [B, S, E].
    const std::string pooled = g_.node("MatMul", {g_.to_compute(pool_weights_), x.name}, join(path, "masked_mean"));
    return Value{g_.node("Reshape", {pooled, g_.ints(join(path, "pooled_shape"), {0, -1})}, join(path, "pooled")), 2};
  }
  if (dynamic_cast<const nn::LmHead*>(&m)) return lm_head(m, path, x);
  return Status::unimplemented("ONNX export: module '" + (path.empty() ? std::string("(the model)") : path) +
                               "' is a " + m.type_name() +
                               ", which the exporter does not know (it exports the built-in models and model-file "
                               "layers: Linear, Conv2d, ReLU, GELU, MaxPool2d, Flatten, GlobalAvgPool, LayerNorm, "
                               "BatchNorm2d, Dropout, Residual, Sequential, embedding, encoder, decoder, lm_head)");
}

StatusOr<Value> LayerEmitter::sequence(const nn::Module& m, const std::string& path, Value x) {
  for (const auto& [name, child] : m.children()) {
    auto out = module(*child, join(path, name), x);
    if (!out.is_ok()) return out.status();
    x = *out;
  }
  return x;
}

Value LayerEmitter::linear(const nn::Linear& m, const std::string& path, const Value& x) {
  if (x.rank == 2) {  // Gemm: x W^T + b, the weight as stored ([out, in], transB)
    std::vector<std::string> in{x.name, g_.weight(join(path, "weight"), m.weight)};
    if (m.bias.defined()) in.push_back(g_.weight(join(path, "bias"), m.bias));
    return {g_.node("Gemm", in, join(path, "out"), {{"transB", int64_t(1)}}), 2};
  }
  // Token layers [B, S, in]: MatMul broadcasts over the leading dims, Gemm does not.
  std::string y = g_.node("MatMul", {x.name, g_.weight(join(path, "weight"), m.weight, /*transpose=*/true)},
                          join(path, "matmul"));
  if (m.bias.defined()) y = g_.node("Add", {y, g_.weight(join(path, "bias"), m.bias)}, join(path, "out"));
  return {y, x.rank};
}

Value LayerEmitter::conv(const nn::Conv2d& m, const std::string& path, const Value& x) {
  const int64_t k = m.weight.size(2), s = m.stride, p = m.padding;
  std::vector<std::string> in{x.name, g_.weight(join(path, "weight"), m.weight)};
  if (m.bias.defined()) in.push_back(g_.weight(join(path, "bias"), m.bias));
  return {g_.node("Conv", in, join(path, "out"),
                  {{"kernel_shape", std::vector<int64_t>{k, k}},
                   {"strides", std::vector<int64_t>{s, s}},
                   {"pads", std::vector<int64_t>{p, p, p, p}}}),
          4};
}

Value LayerEmitter::max_pool(const Value& x, int64_t kernel, int64_t stride, int64_t padding, const std::string& path) {
  // PyTorch's (and mixprec's) floor mode is ONNX's default ceil_mode = 0; both pad with -inf.
  return {g_.node("MaxPool", {x.name}, path,
                  {{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
                   {"strides", std::vector<int64_t>{stride, stride}},
                   {"pads", std::vector<int64_t>{padding, padding, padding, padding}}}),
          x.rank};
}

Value LayerEmitter::layer_norm(const nn::LayerNorm& m, const std::string& path, const Value& x) {
  // f32 statistics and f32 parameters under every precision (the O2 presets keep them).
  const int64_t dims = int64_t(m.normalized_shape.size());
  int64_t n = 1;
  for (int64_t d : m.normalized_shape) n *= d;
  const std::string scale = m.weight.defined() ? g_.weight_f32(join(path, "weight"), m.weight)
                                               : g_.constant_f32(join(path, "ones"), std::vector<float>(size_t(n), 1.0f), m.normalized_shape);
  std::vector<std::string> in{g_.to_f32(x.name), scale};
  if (m.bias.defined()) in.push_back(g_.weight_f32(join(path, "bias"), m.bias));
  const std::string y = g_.node("LayerNormalization", in, join(path, "out"),
                                {{"axis", -dims}, {"epsilon", float(m.eps)}});
  return {g_.to_compute(y), x.rank};
}

Value LayerEmitter::batch_norm(const nn::BatchNorm2d& m, const std::string& path, const Value& x) {
  const std::string y = g_.node(
      "BatchNormalization",
      {g_.to_f32(x.name), g_.weight_f32(join(path, "weight"), m.weight), g_.weight_f32(join(path, "bias"), m.bias),
       g_.weight_f32(join(path, "running_mean"), m.running_mean), g_.weight_f32(join(path, "running_var"), m.running_var)},
      join(path, "out"), {{"epsilon", float(m.eps)}});
  return {g_.to_compute(y), x.rank};
}

Value LayerEmitter::gelu(const Value& x, const std::string& path) {
  // Exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)): opset 17 has no Gelu op. In f32, as
  // mixprec's kernel evaluates it, rounded once to the compute dtype at the end.
  const std::string x32 = g_.to_f32(x.name);
  const std::string scaled = g_.node("Mul", {x32, g_.constant_f32("inv_sqrt2", {float(1.0 / std::sqrt(2.0))}, {})}, path + "_scaled");
  const std::string erf1 = g_.node("Add", {g_.node("Erf", {scaled}, path + "_erf"), g_.constant_f32("one", {1.0f}, {})}, path + "_erf1");
  const std::string half = g_.node("Mul", {x32, g_.constant_f32("half", {0.5f}, {})}, path + "_half");
  return {g_.to_compute(g_.node("Mul", {half, erf1}, path)), x.rank};
}

Value LayerEmitter::relu(const Value& x, const std::string& path) { return {g_.node("Relu", {x.name}, path), x.rank}; }

Value LayerEmitter::add(const Value& a, const Value& b, const std::string& path) {
  return {g_.node("Add", {a.name, b.name}, join(path, "add")), a.rank};
}

Value LayerEmitter::flatten(const Value& x, const std::string& path) {
  return {g_.node("Flatten", {x.name}, path, {{"axis", int64_t(1)}}), 2};
}

Value LayerEmitter::attention(const nn::MultiheadAttention& m, const std::string& path, const Value& x) {
  // x [B, S, E]. One projection per block of in_proj rows (Q, K, V), as forward() does; heads
  // split by Reshape (0 copies B and S, so both stay dynamic) and Transpose.
  const int64_t E = m.embed_dim, H = m.num_heads, D = m.head_dim;
  const std::string heads_shape = g_.ints(join(path, "heads_shape"), {0, 0, H, D});
  auto project = [&](int64_t part, const char* name, const std::vector<int64_t>& perm) {
    const Tensor w = narrow(m.in_proj_weight, part * E, E);
    std::string y = g_.node("MatMul", {x.name, g_.weight(join(path, std::string("in_proj_weight.") + name), w, true)},
                            join(path, std::string(name) + "_proj"));
    if (m.in_proj_bias.defined())
      y = g_.node("Add", {y, g_.weight(join(path, std::string("in_proj_bias.") + name), narrow(m.in_proj_bias, part * E, E))},
                  join(path, std::string(name) + "_biased"));
    y = g_.node("Reshape", {y, heads_shape}, join(path, std::string(name) + "_heads"));
    return g_.node("Transpose", {y}, join(path, name), {{"perm", perm}});
  };
  // PyTorch scales Q by 1 / sqrt(D) before the product, as mixprec does.
  const std::string q = g_.node("Mul", {project(0, "q", {0, 2, 1, 3}), g_.constant(join(path, "scale"), {float(1.0 / std::sqrt(double(D)))}, {})},
                                join(path, "q_scaled"));
  const std::string k_t = project(1, "k", {0, 2, 3, 1});  // [B, H, D, S]
  const std::string v = project(2, "v", {0, 2, 1, 3});    // [B, H, S, D]
  std::string scores = g_.to_f32(g_.node("MatMul", {q, k_t}, join(path, "scores")));  // [B, H, S, S], softmax in f32
  if (!key_mask_.empty()) scores = g_.node("Add", {scores, key_mask_}, join(path, "padding_masked"));
  if (m.causal) {
    // -inf above the diagonal: a [C, C] constant for the longest sequence the model takes,
    // sliced to [S, S] with S read off the input (so one graph serves every length).
    const int64_t C = causal_context_;
    std::vector<float> mask(size_t(C * C), 0.0f);
    for (int64_t i = 0; i < C; ++i)
      for (int64_t j = i + 1; j < C; ++j) mask[size_t(i * C + j)] = -std::numeric_limits<float>::infinity();
    const std::string full = g_.constant_f32(join(path, "causal_mask"), mask, {C, C});
    const std::string s = g_.node("Shape", {x.name}, join(path, "seq_len"), {{"start", int64_t(1)}, {"end", int64_t(2)}});
    const std::string ends = g_.node("Concat", {s, s}, join(path, "mask_ends"), {{"axis", int64_t(0)}});
    const std::string sliced = g_.node("Slice", {full, g_.ints(join(path, "mask_starts"), {0, 0}), ends}, join(path, "mask"));
    scores = g_.node("Add", {scores, sliced}, join(path, "masked_scores"));
  }
  const std::string weights = g_.to_compute(g_.node("Softmax", {scores}, join(path, "weights"), {{"axis", int64_t(-1)}}));
  std::string context = g_.node("MatMul", {weights, v}, join(path, "context"));  // [B, H, S, D]
  context = g_.node("Transpose", {context}, join(path, "context_t"), {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  context = g_.node("Reshape", {context, g_.ints(join(path, "merged_shape"), {0, 0, E})}, join(path, "merged"));
  return linear(*m.out_proj, join(path, "out_proj"), Value{context, 3});
}

StatusOr<Value> LayerEmitter::encoder_layer(const nn::TransformerEncoderLayer& m, const std::string& path, Value x) {
  // Post-norm: x = norm1(x + self_attn(x)); x = norm2(x + linear2(act(linear1(x)))).
  const Value h = layer_norm(*m.norm1, join(path, "norm1"), add(x, attention(*m.self_attn, join(path, "self_attn"), x), join(path, "attn")));
  Value ff = linear(*m.linear1, join(path, "linear1"), h);
  ff = m.activation == nn::Activation::gelu ? gelu(ff, join(path, "gelu")) : relu(ff, join(path, "relu"));
  ff = linear(*m.linear2, join(path, "linear2"), ff);
  return layer_norm(*m.norm2, join(path, "norm2"), add(h, ff, join(path, "ff")));
}

Value LayerEmitter::basic_block(const nn::BasicBlock& m, const std::string& path, const Value& x) {
  Value y = relu(batch_norm(*m.bn1, join(path, "bn1"), conv(*m.conv1, join(path, "conv1"), x)), join(path, "relu1"));
  y = batch_norm(*m.bn2, join(path, "bn2"), conv(*m.conv2, join(path, "conv2"), y));
  Value shortcut = x;
  if (m.downsample) {
    const auto& kids = m.downsample->children();
    shortcut = conv(static_cast<const nn::Conv2d&>(*kids.at(0).second), join(path, "downsample.0"), x);
    shortcut = batch_norm(static_cast<const nn::BatchNorm2d&>(*kids.at(1).second), join(path, "downsample.1"), shortcut);
  }
  return relu(add(y, shortcut, path), join(path, "relu2"));
}

Value LayerEmitter::gpt_block(const nn::GptBlock& m, const std::string& path, const Value& x) {
  const Value y = add(x, attention(*m.attn, join(path, "attn"), layer_norm(*m.ln_1, join(path, "ln_1"), x)), join(path, "attn"));
  const Value h = layer_norm(*m.ln_2, join(path, "ln_2"), y);
  const Value mlp = linear(*m.mlp->c_proj, join(path, "mlp.c_proj"),
                           gelu(linear(*m.mlp->c_fc, join(path, "mlp.c_fc"), h), join(path, "mlp.gelu")));
  return add(y, mlp, join(path, "mlp"));
}

Value LayerEmitter::gpt(const nn::Gpt& m, const Value& tokens) {
  // tokens [B, T] i64 -> wte[tokens] + wpe[0..T) -> blocks -> ln_f -> x wte^T (weight tying:
  // the head reads the same initializer as the lookup, transposed by a node).
  causal_context_ = m.context;
  const std::string wte = g_.weight("wte.weight", m.wte->weight);
  const std::string tok = g_.node("Gather", {wte, tokens.name}, "tok_emb", {{"axis", int64_t(0)}});
  const std::string t = g_.node("Shape", {tokens.name}, "seq_len", {{"start", int64_t(1)}, {"end", int64_t(2)}});
  const std::string pos = g_.node("Slice", {g_.weight("wpe.weight", m.wpe->weight), g_.ints("pos_start", {0}), t}, "pos_emb");
  Value x{g_.node("Add", {tok, pos}, "embedded"), 3};
  for (const auto& [name, block] : m.h->children())
    x = gpt_block(static_cast<const nn::GptBlock&>(*block), "h." + name, x);
  x = layer_norm(*m.ln_f, "ln_f", x);
  const std::string head = g_.node("Transpose", {wte}, "wte_t", {{"perm", std::vector<int64_t>{1, 0}}});
  return {g_.node("MatMul", {x.name, head}, "head"), 3};
}

Value LayerEmitter::token_embedding(const nn::TokenEmbedding& m, const std::string& path, const Value& ids) {
  // ids [B, T] i64 -> tokens[ids] + positions[0..T) (TokenEmbedding::forward); a causal
  // attention after it sees at most as many positions as the table has.
  causal_context_ = m.positions->weight.size(0);
  const std::string table = g_.weight(join(path, "tokens.weight"), m.tokens->weight);
  token_tables_[m.tokens.get()] = table;
  const std::string tok = g_.node("Gather", {table, ids.name}, join(path, "tok_emb"), {{"axis", int64_t(0)}});
  const std::string t = g_.node("Shape", {ids.name}, join(path, "seq_len"), {{"start", int64_t(1)}, {"end", int64_t(2)}});
  const std::string pos = g_.node("Slice", {g_.weight(join(path, "positions.weight"), m.positions->weight),
                                            g_.ints(join(path, "pos_start"), {0}), t},
                                  join(path, "pos_emb"));
  return {g_.node("Add", {tok, pos}, join(path, "embedded")), 3};
}

StatusOr<Value> LayerEmitter::lm_head(const nn::Module& m, const std::string& path, const Value& x) {
  const auto& head = static_cast<const nn::LmHead&>(m);
  std::string w_t;  // [E, vocab]
  if (head.tied()) {
    auto it = token_tables_.find(head.tied());
    if (it == token_tables_.end())
      return Status::unimplemented("ONNX export: " + path + " is tied to a token table the graph has not emitted");
    w_t = g_.node("Transpose", {it->second}, join(path, "tied_t"), {{"perm", std::vector<int64_t>{1, 0}}});
  } else {
    w_t = g_.weight(join(path, "weight"), head.weight, true);
  }
  return Value{g_.node("MatMul", {x.name, w_t}, join(path, "logits")), 3};
}

StatusOr<Value> LayerEmitter::text_classifier(const nn::Module& m, const std::string& path, const Value& ids) {
  // keep [B, S]: 1 at a text's bytes, 0 at its padding (byte 0), as nn::padding_weights reads it.
  const std::string nonzero = g_.node("Cast", {ids.name}, join(path, "nonpadding"), {{"to", int64_t(TensorProto::BOOL)}});
  const std::string keep = g_.node("Cast", {nonzero}, join(path, "keep"), {{"to", int64_t(TensorProto::FLOAT)}});
  // (keep - 1) x -kPaddingScore: 0, or kPaddingScore at padding; [B, 1, 1, S] over the scores.
  const std::string off = g_.node("Sub", {keep, g_.constant_f32(join(path, "one"), {1.0f}, {})}, join(path, "keep_minus_one"));
  const std::string mask = g_.node("Mul", {off, g_.constant_f32(join(path, "padding_score"), {float(-nn::kPaddingScore)}, {})},
                                   join(path, "key_mask_flat"));
  key_mask_ = g_.node("Reshape", {mask, g_.ints(join(path, "key_mask_shape"), {0, 1, 1, -1})}, join(path, "key_mask"));
  // Pooling weights keep / count, count = keep . keep (0/1 values); a text of padding only
  // gets 0 weights (0 / tiny), as padding_weights gives.
  const std::string keep3 = g_.node("Reshape", {keep, g_.ints(join(path, "keep_shape"), {0, 1, -1})}, join(path, "keep3"));
  const std::string keep3_t = g_.node("Transpose", {keep3}, join(path, "keep3_t"), {{"perm", std::vector<int64_t>{0, 2, 1}}});
  const std::string count = g_.node("MatMul", {keep3, keep3_t}, join(path, "count"));  // [B, 1, 1]
  const std::string safe = g_.node("Add", {count, g_.constant_f32(join(path, "tiny"), {1e-30f}, {})}, join(path, "count_safe"));
  pool_weights_ = g_.node("Div", {keep3, safe}, join(path, "pool_weights"));
  auto out = sequence(m, path, ids);
  key_mask_.clear();
  pool_weights_.clear();
  return out;
}

}  // namespace mixprec::onnx_export
