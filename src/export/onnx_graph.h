// export/onnx_graph.h: builds an ONNX GraphProto one node at a time: unique value names,
// initializers from mixprec tensors in the export's weight dtype, small constants, and the
// dtype the layers compute in (f32, or f16 for an fp16 export, with f32 islands for
// normalisation and softmax). The layer emitters (onnx_layers.cpp) only say what to compute.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/core/tensor.h"
#include "nn/onnx_writer.h"

namespace mixprec::onnx_export {

// One node attribute: an int, a float or a list of ints (the layer types write them too).
using Attr = nn::OnnxAttr;

class OnnxGraph {
 public:
  // weights: how parameters are stored (f32, f16 or bf16). Layers compute in f16 when the
  // weights are f16, else in f32 (bf16 weights are cast to f32 where they are used).
  OnnxGraph(onnx::GraphProto* graph, DType weights);

  // ONNX's element type of the activations right now (FLOAT or FLOAT16).
  int32_t compute_type() const { return compute_f16_ ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT; }
  bool computes_f16() const { return compute_f16_; }
  bool in_f32_island() const { return island_; }
  // Inside a module with autocast off: activations f32, and weights stored f32 whatever the
  // precision (Module::to keeps such a module's parameters f32). Callers cast values with
  // to_f32() / to_compute() at the boundaries.
  void set_f32_island(bool on) {
    island_ = on;
    compute_f16_ = !on && weights_ == DType::f16;
  }

  // A parameter as a value of the compute dtype, stored once in the weight dtype under its
  // own name ("conv1.weight"); 16-bit storage under f32 compute adds a Cast to f32 after it.
  // transpose: store a 2-D weight transposed ([out, in] -> [in, out], for MatMul).
  std::string weight(const std::string& name, const Tensor& t, bool transpose = false);
  // A parameter kept in f32 whatever the export's precision (normalisation layers, as O2).
  std::string weight_f32(const std::string& name, const Tensor& t);
  // Constants: f32 values of the given shape, as a value of the compute dtype (or f32).
  std::string constant(const std::string& hint, const std::vector<float>& values, const std::vector<int64_t>& shape);
  std::string constant_f32(const std::string& hint, const std::vector<float>& values, const std::vector<int64_t>& shape);
  std::string ints(const std::string& hint, const std::vector<int64_t>& values);  // 1-D i64

  // Adds op_type(inputs) with one output, named after hint; returns the output's name.
  std::string node(const std::string& op_type, const std::vector<std::string>& inputs,
                   const std::string& hint, const std::vector<Attr>& attrs = {});
  std::string cast(const std::string& x, int32_t to);
  // x (in the compute dtype) as f32, and back; no node when nothing changes.
  std::string to_f32(const std::string& x) { return compute_f16_ ? cast(x, onnx::TensorProto::FLOAT) : x; }
  std::string to_compute(const std::string& x) { return compute_f16_ ? cast(x, onnx::TensorProto::FLOAT16) : x; }

  // Declares a graph input or output: elem type and dims (a negative dim is the symbolic
  // "batch", a dim of 0 a symbolic name taken from dim_names).
  void input(const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
             const std::vector<std::string>& dim_names = {});
  void output(const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
              const std::vector<std::string>& dim_names = {});

 private:
  std::string unique(const std::string& hint);
  void add_initializer(const std::string& name, const std::vector<float>& values, const std::vector<int64_t>& dims,
                       DType storage);
  onnx::GraphProto* graph_;
  DType weights_;
  bool compute_f16_;
  bool island_ = false;
  std::unordered_set<std::string> used_;  // value names handed out, for unique()
};

}  // namespace mixprec::onnx_export
