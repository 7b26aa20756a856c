// onnx_writer.h: ONNX as a layer type writes it (layer_type.h's emit_onnx). src/export
// implements OnnxWriter on its graph (export is the only folder that includes libonnx, and
// sits below nn), so a layer type's nodes are written in its own entry file, in nn.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "mixprec/nn/nn.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

struct OnnxValue {
  std::string name;
  int rank = 0;  // image layers see [B, C, H, W] or [B, F], token layers [B, S, E]
};
// One node attribute: an int, a float or a list of ints (all the ops emitted here need).
struct OnnxAttr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>> value;
};

class OnnxWriter {
 public:
  virtual ~OnnxWriter() = default;
  // op_type(inputs) with one output named after hint; returns the output's name.
  virtual std::string node(const std::string& op_type, const std::vector<std::string>& inputs,
                           const std::string& hint, const std::vector<OnnxAttr>& attrs = {}) = 0;
  // A parameter as a value of the compute dtype, stored once in the export's weight dtype
  // (transpose: a 2-D weight stored [in, out], for MatMul); weight_f32 keeps it f32.
  virtual std::string weight(const std::string& name, const Tensor& t, bool transpose = false) = 0;
  virtual std::string weight_f32(const std::string& name, const Tensor& t) = 0;
  virtual std::string constant(const std::string& hint, const std::vector<float>& values,
                               const std::vector<int64_t>& shape) = 0;
  virtual std::string constant_f32(const std::string& hint, const std::vector<float>& values,
                                   const std::vector<int64_t>& shape) = 0;
  virtual std::string ints(const std::string& hint, const std::vector<int64_t>& values) = 0;  // 1-D i64
  // x (in the compute dtype) as f32, and back; no node when nothing changes.
  virtual std::string to_f32(const std::string& x) = 0;
  virtual std::string to_compute(const std::string& x) = 0;
  // A child module, through the exporter (its precision, its layer type's emission).
  virtual StatusOr<OnnxValue> module(const Module& m, const std::string& path, const OnnxValue& x) = 0;

  // What the text layers share while a graph is written: the longest sequence a causal
  // attention can see (the mask constant each causal layer slices), each emitted token
  // table's initializer (a tied lm_head reads the same one), and while a masked text
  // classifier is written its additive key mask [B, 1, 1, S] and pooling weights [B, 1, S].
  int64_t causal_context = 0;
  std::map<const Embedding*, std::string> token_tables;
  std::string key_mask, pool_weights;
};

// "path.child" ("child" at the top).
inline std::string onnx_join(const std::string& path, const std::string& child) {
  return path.empty() ? child : path + "." + child;
}

}  // namespace mixprec::nn
