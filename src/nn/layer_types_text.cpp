// layer_types_text.cpp: the layer types of text (layer_type.h): embedding (byte ids [T] ->
// [T, dim]), encoder (BERT's post-norm layer), decoder (GPT-2's pre-norm causal block) and
// lm_head (a language model's last layer), and the attention the two blocks share in ONNX.
// Each entry: its parameters, its plan (shapes, parameter count, errors), its module, its
// ONNX nodes, its summary row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "mixprec/nn/models.h"
#include "mixprec/nn/nn_attention.h"
#include "nn/language_model_layers.h"
#include "nn/layer_type.h"
#include "nn/model_planner.h"

namespace mixprec::nn {
namespace {

using plan_detail::kMaxWidth;
using plan_detail::Planner;
using plan_detail::shape_text;
using Shape_ = std::vector<int64_t>;

// ---- embedding: byte ids [T] -> [T, dim], tokens + learned positions
Status plan_embedding(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  MIXPREC_TAKE(dim, pl.integer(a.p, "dim", a.at, std::nullopt, 1, kMaxWidth));
  const int64_t T = shape[0];
  // Learned positions: `context` of them (a language model's window), else the input's T.
  MIXPREC_TAKE(context, pl.integer(a.p, "context", a.at, T, 1, kMaxWidth));
  if (context < T)
    return pl.error(a.at + "/context", "context: " + std::to_string(context) + " positions, but the texts here have " +
                                           std::to_string(T) + " bytes (--max-tokens)");
  MIXPREC_TAKE(mask_padding, pl.boolean(a.p, "mask_padding", a.at, false));
  if (mask_padding && pl.language_model())
    return pl.error(a.at + "/mask_padding", "mask_padding: a language model's windows of text have no padding (it is "
                                            "for text classifiers, whose texts are 0-padded to --max-tokens)");
  m.mask_padding = mask_padding;
  m.parameters = (256 + context) * dim;  // both <= 65536: no overflow
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = context, m.out = dim;
  shape = {T, dim};
  pl.set_reads_ids(false);
  pl.set_embedding_dim(dim);
  return Status::ok();
}

const LayerType embedding_type{
    .name = "embedding",
    .params = {{"dim", LayerParam::integer}, {"context", LayerParam::integer}, {"mask_padding", LayerParam::boolean}},
    .plan = plan_embedding,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState& state) -> std::shared_ptr<Module> {
      auto e = std::make_shared<TokenEmbedding>(256, p.in, p.out);
      state.tokens = e->tokens;
      return e;
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const TokenEmbedding*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& module, OnnxWriter& w, const std::string& path,
                    const OnnxValue& ids) -> StatusOr<OnnxValue> {
      // ids [B, T] i64 -> tokens[ids] + positions[0..T) (TokenEmbedding::forward); a causal
      // attention after it sees at most as many positions as the table has.
      const auto& m = static_cast<const TokenEmbedding&>(module);
      w.causal_context = m.positions->weight.size(0);
      const std::string table = w.weight(onnx_join(path, "tokens.weight"), m.tokens->weight);
      w.token_tables[m.tokens.get()] = table;
      const std::string tok = w.node("Gather", {table, ids.name}, onnx_join(path, "tok_emb"), {{"axis", int64_t(0)}});
      const std::string t = w.node("Shape", {ids.name}, onnx_join(path, "seq_len"), {{"start", int64_t(1)}, {"end", int64_t(2)}});
      const std::string pos = w.node("Slice", {w.weight(onnx_join(path, "positions.weight"), m.positions->weight),
                                               w.ints(onnx_join(path, "pos_start"), {0}), t},
                                     onnx_join(path, "pos_emb"));
      return OnnxValue{w.node("Add", {tok, pos}, onnx_join(path, "embedded")), 3};
    }),
    .output_op = amp::OpId::embedding,
    .reads_ids = true,
    .per_position = true,
    .example = "layers: [embedding: {dim: 8}, global_avgpool, linear: {out: classes}]",
};

// What an encoder or decoder block [T, E] holds for backward, feed-forward width F: its
// output, q, k, v and their per-head copies, attention output and projection, two norms and
// two residual sums (13 E per position), the feed-forward hidden layer before and after its
// activation (2 F), and per head the scores and their softmax (2 T per position).
double attention_block_activations(const LayerPlan& p, double F) {
  const double T = double(p.output_shape[0]), E = double(p.in), H = double(std::max<int64_t>(p.heads, 1));
  return T * E + T * (13 * E + 2 * F) + 2 * H * T * T;
}

// ---- encoder: [T, E] -> [T, E], BERT's post-norm transformer encoder layer
Status plan_encoder(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  if (shape.size() != 2)
    return pl.error(a.at, "encoder takes a sequence [T, E] (after an embedding); its input here is " + shape_text(shape));
  const int64_t E = shape[1];
  MIXPREC_TAKE(heads, pl.integer(a.p, "heads", a.at, 4, 1, E));
  if (E % heads != 0)
    return pl.error(a.at + "/heads", "heads: " + std::to_string(heads) + " does not divide the width " +
                                         std::to_string(E) + " (each head gets E / heads values)");
  MIXPREC_TAKE(ffn, pl.integer(a.p, "ffn", a.at, 4 * E, 1, kMaxWidth));
  MIXPREC_TAKE(prob, pl.number(a.p, "dropout", a.at, 0.1, 0.0, 1.0, true));
  MIXPREC_TAKE(eps, pl.number(a.p, "eps", a.at, 1e-5, 1e-12, 1.0, false));
  // in_proj 3E x E + 3E, out_proj E x E + E, linear1 F x E + F, linear2 E x F + E, two norms.
  m.parameters = 4 * E * E + 2 * E * ffn + 9 * E + ffn;
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = E, m.out = ffn, m.heads = heads, m.p = prob, m.eps = eps;
  return Status::ok();
}

const LayerType encoder_type{
    .name = "encoder",
    .params = {{"heads", LayerParam::integer}, {"ffn", LayerParam::integer}, {"dropout", LayerParam::number},
               {"eps", LayerParam::number}},
    .plan = plan_encoder,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<TransformerEncoderLayer>(p.in, p.heads, p.out, p.p, Activation::gelu, p.eps);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const TransformerEncoderLayer*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& module, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      // Post-norm: x = norm1(x + self_attn(x)); x = norm2(x + linear2(act(linear1(x)))).
      const auto& m = static_cast<const TransformerEncoderLayer&>(module);
      const OnnxValue h =
          onnx_layer_norm(*m.norm1, w, onnx_join(path, "norm1"),
                          onnx_add(w, x, onnx_attention(*m.self_attn, w, onnx_join(path, "self_attn"), x), onnx_join(path, "attn")));
      OnnxValue ff = onnx_linear(*m.linear1, w, onnx_join(path, "linear1"), h);
      ff = m.activation == Activation::gelu ? onnx_gelu(w, ff, onnx_join(path, "gelu")) : onnx_relu(w, ff, onnx_join(path, "relu"));
      ff = onnx_linear(*m.linear2, w, onnx_join(path, "linear2"), ff);
      return onnx_layer_norm(*m.norm2, w, onnx_join(path, "norm2"), onnx_add(w, h, ff, onnx_join(path, "ff")));
    }),
    // It ends in its layer norm: that row decides its output.
    .output_op = amp::OpId::layer_norm,
    .autocast_why = "ends in layer norm (autocast: fp32); its matmuls run in {autocast}",
    .language_model_hint = "encoder attends to later positions too: use decoder",
    .kept_activations = [](const LayerPlan& p) { return attention_block_activations(p, double(p.out)); },
    .example = "layers: [embedding: {dim: 8}, encoder: {heads: 2, ffn: 16}, global_avgpool, linear: {out: classes}]",
};

// ---- decoder: [T, E] -> [T, E], GPT-2's pre-norm block with causal attention
Status plan_decoder(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  if (shape.size() != 2)
    return pl.error(a.at, "decoder takes a sequence [T, E] (after an embedding); its input here is " + shape_text(shape));
  const int64_t E = shape[1];
  MIXPREC_TAKE(heads, pl.integer(a.p, "heads", a.at, 4, 1, E));
  if (E % heads != 0)
    return pl.error(a.at + "/heads", "heads: " + std::to_string(heads) + " does not divide the width " +
                                         std::to_string(E) + " (each head gets E / heads values)");
  // Two norms 4E, attention in_proj 3E x E + 3E and out_proj E x E + E, MLP 4E x E + 4E and
  // E x 4E + E. E <= 65536: below 2^56.
  m.parameters = 12 * E * E + 13 * E;
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = E, m.heads = heads;
  return Status::ok();
}

#ifndef MIXPREC_LAYER_PLAN_ONLY
int64_t count_decoders(const std::vector<LayerPlan>& plans) {
  int64_t n = 0;
  for (const LayerPlan& p : plans) n += (p.type == "decoder") + count_decoders(p.body) + count_decoders(p.shortcut);
  return n;
}
#endif

const LayerType decoder_type{
    .name = "decoder",
    .params = {{"heads", LayerParam::integer}},
    .plan = plan_decoder,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState& state) -> std::shared_ptr<Module> {
      auto block = std::make_shared<GptBlock>(p.in, p.heads);
      // GPT-2's initialisation scales the output projections by the file's decoder count.
      init_gpt2_block(*block, count_decoders(*state.plan));
      return block;
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const GptBlock*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& module, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      const auto& m = static_cast<const GptBlock&>(module);
      const OnnxValue y = onnx_add(
          w, x, onnx_attention(*m.attn, w, onnx_join(path, "attn"), onnx_layer_norm(*m.ln_1, w, onnx_join(path, "ln_1"), x)),
          onnx_join(path, "attn"));
      const OnnxValue h = onnx_layer_norm(*m.ln_2, w, onnx_join(path, "ln_2"), y);
      const OnnxValue mlp =
          onnx_linear(*m.mlp->c_proj, w, onnx_join(path, "mlp.c_proj"),
                      onnx_gelu(w, onnx_linear(*m.mlp->c_fc, w, onnx_join(path, "mlp.c_fc"), h), onnx_join(path, "mlp.gelu")));
      return onnx_add(w, y, mlp, onnx_join(path, "mlp"));
    }),
    // It ends in its residual add: the stream keeps its dtype.
    .output_op = amp::OpId::add,
    .per_position = true,
    .per_position_note = " (causal attention)",
    .kept_activations = [](const LayerPlan& p) { return attention_block_activations(p, 4.0 * double(p.in)); },
    .example = "layers: [embedding: {dim: 8, context: 8}, decoder: {heads: 2}, layernorm, lm_head]",
};

// ---- lm_head: [T, E] -> [T, 256], the next byte's logits at every position
Status plan_lm_head(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  if (shape.size() != 2) return pl.error(a.at, "lm_head takes a sequence [T, E]; its input here is " + shape_text(shape));
  MIXPREC_TAKE(tied, pl.boolean(a.p, "tied", a.at, true));
  const int64_t E = shape[1];
  if (tied && E != pl.embedding_dim())
    return pl.error(a.at, "lm_head: tied to the embedding's token table of width " + std::to_string(pl.embedding_dim()) +
                              ", but its input is " + shape_text(shape) + " (tied: false gives it a weight of its own)");
  m.parameters = tied ? 0 : 256 * E;
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = E, m.out = 256, m.tied = tied;
  shape = {shape[0], 256};
  pl.end_language_model();
  return Status::ok();
}

const LayerType lm_head_type{
    .name = "lm_head",
    .params = {{"tied", LayerParam::boolean}},
    .plan = plan_lm_head,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState& state) -> std::shared_ptr<Module> {
      if (p.tied) return std::make_shared<LmHead>(state.tokens);
      return std::make_shared<LmHead>(p.out, p.in);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const LmHead*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      const auto& head = static_cast<const LmHead&>(m);
      std::string w_t;  // [E, vocab]
      if (head.tied()) {
        auto it = w.token_tables.find(head.tied());
        if (it == w.token_tables.end())
          return Status::unimplemented("ONNX export: " + path + " is tied to a token table the graph has not emitted");
        w_t = w.node("Transpose", {it->second}, onnx_join(path, "tied_t"), {{"perm", std::vector<int64_t>{1, 0}}});
      } else {
        w_t = w.weight(onnx_join(path, "weight"), head.weight, true);
      }
      return OnnxValue{w.node("MatMul", {x.name, w_t}, onnx_join(path, "logits")), 3};
    }),
    .output_op = amp::OpId::linear,  // a linear without bias
    .ends_language_model = true,
    .per_position = true,
    .example = "layers: [embedding: {dim: 8, context: 8}, lm_head: {tied: false}]",
};

#undef MIXPREC_TAKE

}  // namespace

#ifndef MIXPREC_LAYER_PLAN_ONLY
OnnxValue onnx_attention(const MultiheadAttention& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) {
  // x [B, S, E]. One projection per block of in_proj rows (Q, K, V), as forward() does; heads
  // split by Reshape (0 copies B and S, so both stay dynamic) and Transpose.
  const int64_t E = m.embed_dim, H = m.num_heads, D = m.head_dim;
  const std::string heads_shape = w.ints(onnx_join(path, "heads_shape"), {0, 0, H, D});
  auto project = [&](int64_t part, const char* name, const std::vector<int64_t>& perm) {
    const Tensor wt = narrow(m.in_proj_weight, part * E, E);
    std::string y = w.node("MatMul", {x.name, w.weight(onnx_join(path, std::string("in_proj_weight.") + name), wt, true)},
                           onnx_join(path, std::string(name) + "_proj"));
    if (m.in_proj_bias.defined())
      y = w.node("Add", {y, w.weight(onnx_join(path, std::string("in_proj_bias.") + name), narrow(m.in_proj_bias, part * E, E))},
                 onnx_join(path, std::string(name) + "_biased"));
    y = w.node("Reshape", {y, heads_shape}, onnx_join(path, std::string(name) + "_heads"));
    return w.node("Transpose", {y}, onnx_join(path, name), {{"perm", perm}});
  };
  // PyTorch scales Q by 1 / sqrt(D) before the product, as mixprec does.
  const std::string q = w.node(
      "Mul", {project(0, "q", {0, 2, 1, 3}), w.constant(onnx_join(path, "scale"), {float(1.0 / std::sqrt(double(D)))}, {})},
      onnx_join(path, "q_scaled"));
  const std::string k_t = project(1, "k", {0, 2, 3, 1});  // [B, H, D, S]
  const std::string v = project(2, "v", {0, 2, 1, 3});    // [B, H, S, D]
  std::string scores = w.to_f32(w.node("MatMul", {q, k_t}, onnx_join(path, "scores")));  // [B, H, S, S], softmax in f32
  if (!w.key_mask.empty()) scores = w.node("Add", {scores, w.key_mask}, onnx_join(path, "padding_masked"));
  if (m.causal) {
    // -inf above the diagonal: a [C, C] constant for the longest sequence the model takes,
    // sliced to [S, S] with S read off the input (so one graph serves every length).
    const int64_t C = w.causal_context;
    std::vector<float> mask(size_t(C * C), 0.0f);
    for (int64_t i = 0; i < C; ++i)
      for (int64_t j = i + 1; j < C; ++j) mask[size_t(i * C + j)] = -std::numeric_limits<float>::infinity();
    const std::string full = w.constant_f32(onnx_join(path, "causal_mask"), mask, {C, C});
    const std::string s = w.node("Shape", {x.name}, onnx_join(path, "seq_len"), {{"start", int64_t(1)}, {"end", int64_t(2)}});
    const std::string ends = w.node("Concat", {s, s}, onnx_join(path, "mask_ends"), {{"axis", int64_t(0)}});
    const std::string sliced =
        w.node("Slice", {full, w.ints(onnx_join(path, "mask_starts"), {0, 0}), ends}, onnx_join(path, "mask"));
    scores = w.node("Add", {scores, sliced}, onnx_join(path, "masked_scores"));
  }
  const std::string weights = w.to_compute(w.node("Softmax", {scores}, onnx_join(path, "weights"), {{"axis", int64_t(-1)}}));
  std::string context = w.node("MatMul", {weights, v}, onnx_join(path, "context"));  // [B, H, S, D]
  context = w.node("Transpose", {context}, onnx_join(path, "context_t"), {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  context = w.node("Reshape", {context, w.ints(onnx_join(path, "merged_shape"), {0, 0, E})}, onnx_join(path, "merged"));
  return onnx_linear(*m.out_proj, w, onnx_join(path, "out_proj"), OnnxValue{context, 3});
}

#endif  // MIXPREC_LAYER_PLAN_ONLY

std::vector<const LayerType*> text_layer_types() { return {&embedding_type, &encoder_type, &decoder_type, &lm_head_type}; }

}  // namespace mixprec::nn
