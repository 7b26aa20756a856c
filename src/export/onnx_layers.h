// export/onnx_layers.h: a model as ONNX nodes, module by module, computing what its forward()
// computes in eval mode (dropout the identity, batch norm with its running statistics). A
// model file's layers are written by their layer type's entry (src/nn/layer_type.h), through
// the nn::OnnxWriter this emitter implements on the graph; the built-in models (Cnn, Mlp,
// ResNet, TransformerClassifier, Gpt) and a masked text classifier are composed here from the
// same entries' functions. Values carry their rank: image layers see [B, C, H, W] or [B, F],
// token layers [B, S, E].
#pragma once
#include <string>

#include "export/onnx_graph.h"
#include "mixprec/nn/models.h"
#include "mixprec/core/status.h"
#include "nn/onnx_writer.h"

namespace mixprec::onnx_export {

using Value = nn::OnnxValue;

class LayerEmitter : public nn::OnnxWriter {
 public:
  explicit LayerEmitter(OnnxGraph& graph) : g_(graph) {}

  // module(x), where path is the module's name in named_parameters() ("layer1.0"; empty for
  // the model itself). unimplemented naming the path and type for a module it does not know.
  StatusOr<Value> module(const nn::Module& m, const std::string& path, const Value& x) override;

  // nn::OnnxWriter on the graph.
  std::string node(const std::string& op_type, const std::vector<std::string>& inputs, const std::string& hint,
                   const std::vector<nn::OnnxAttr>& attrs = {}) override {
    return g_.node(op_type, inputs, hint, attrs);
  }
  std::string weight(const std::string& name, const Tensor& t, bool transpose = false) override {
    return g_.weight(name, t, transpose);
  }
  std::string weight_f32(const std::string& name, const Tensor& t) override { return g_.weight_f32(name, t); }
  std::string constant(const std::string& hint, const std::vector<float>& values,
                       const std::vector<int64_t>& shape) override {
    return g_.constant(hint, values, shape);
  }
  std::string constant_f32(const std::string& hint, const std::vector<float>& values,
                           const std::vector<int64_t>& shape) override {
    return g_.constant_f32(hint, values, shape);
  }
  std::string ints(const std::string& hint, const std::vector<int64_t>& values) override { return g_.ints(hint, values); }
  std::string to_f32(const std::string& x) override { return g_.to_f32(x); }
  std::string to_compute(const std::string& x) override { return g_.to_compute(x); }

 private:
  StatusOr<Value> dispatch(const nn::Module& m, const std::string& path, const Value& x);
  StatusOr<Value> sequence(const nn::Module& m, const std::string& path, Value x);
  // The built-in models.
  Value basic_block(const nn::BasicBlock& m, const std::string& path, const Value& x);
  StatusOr<Value> gpt(const nn::Gpt& m, const Value& tokens);
  // A text classifier with its padding masked (nn::FileTextClassifier): the key mask and the
  // pooling weights from the ids, then its layers with them.
  StatusOr<Value> text_classifier(const nn::Module& m, const std::string& path, const Value& ids);

  OnnxGraph& g_;
};

}  // namespace mixprec::onnx_export
