// export/onnx_layers.h: each nn module as ONNX nodes, computing what its forward() computes in
// eval mode (dropout the identity, batch norm with its running statistics). Values carry
// their rank: image layers see [B, C, H, W] or [B, F], token layers [B, S, E].
#pragma once
#include <map>
#include <string>

#include "export/onnx_graph.h"
#include "mixprec/models.h"
#include "mixprec/status.h"

namespace mixprec::onnx_export {

struct Value {
  std::string name;
  int rank = 0;
};

class LayerEmitter {
 public:
  explicit LayerEmitter(OnnxGraph& graph) : g_(graph) {}

  // module(x), where path is the module's name in named_parameters() ("layer1.0"; empty for
  // the model itself). unimplemented naming the path and type for a module it does not know.
  StatusOr<Value> module(const nn::Module& m, const std::string& path, const Value& x);

 private:
  StatusOr<Value> dispatch(const nn::Module& m, const std::string& path, const Value& x);
  StatusOr<Value> sequence(const nn::Module& m, const std::string& path, Value x);
  Value linear(const nn::Linear& m, const std::string& path, const Value& x);
  Value conv(const nn::Conv2d& m, const std::string& path, const Value& x);
  Value max_pool(const Value& x, int64_t kernel, int64_t stride, int64_t padding, const std::string& path);
  Value layer_norm(const nn::LayerNorm& m, const std::string& path, const Value& x);
  Value batch_norm(const nn::BatchNorm2d& m, const std::string& path, const Value& x);
  Value gelu(const Value& x, const std::string& path);
  Value relu(const Value& x, const std::string& path);
  Value add(const Value& a, const Value& b, const std::string& path);
  Value flatten(const Value& x, const std::string& path);
  Value attention(const nn::MultiheadAttention& m, const std::string& path, const Value& x);
  StatusOr<Value> encoder_layer(const nn::TransformerEncoderLayer& m, const std::string& path, Value x);
  Value basic_block(const nn::BasicBlock& m, const std::string& path, const Value& x);
  Value gpt_block(const nn::GptBlock& m, const std::string& path, const Value& x);
  Value gpt(const nn::Gpt& m, const Value& tokens);
  // A model file's text layers: byte ids [B, T] -> tokens + positions; [B, T, E] -> [B, E];
  // the language model's head, reading the embedding's initializer when tied.
  Value token_embedding(const nn::TokenEmbedding& m, const std::string& path, const Value& ids);
  StatusOr<Value> lm_head(const nn::Module& m, const std::string& path, const Value& x);
  // A text classifier with its padding masked (nn::FileTextClassifier): the key mask and the
  // pooling weights from the ids, then its layers with them.
  StatusOr<Value> text_classifier(const nn::Module& m, const std::string& path, const Value& ids);

  OnnxGraph& g_;
  // The longest sequence a causal attention can see (the Gpt's context): the size of the
  // mask constant that each causal layer slices to its input's length.
  int64_t causal_context_ = 0;
  // Each emitted token table's initializer (a tied lm_head reads the same one).
  std::map<const nn::Embedding*, std::string> token_tables_;
  // While a masked text classifier is emitted: its additive key mask [B, 1, 1, S] (f32) that
  // attention adds to its scores, and its pooling weights [B, 1, S] (f32); else empty.
  std::string key_mask_, pool_weights_;
};

}  // namespace mixprec::onnx_export
