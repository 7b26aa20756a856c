// export/onnx_graph.cpp: see onnx_graph.h.
#include "export/onnx_graph.h"

#include <cstring>

#include "mixprec/core/half.h"

namespace mixprec::onnx_export {

using onnx::TensorProto;

OnnxGraph::OnnxGraph(onnx::GraphProto* graph, DType weights)
    : graph_(graph), weights_(weights), compute_f16_(weights == DType::f16) {}

std::string OnnxGraph::unique(const std::string& hint) {
  std::string name = hint;
  for (int i = 1; used_.count(name); ++i) name = hint + "_" + std::to_string(i);
  used_.insert(name);
  return name;
}

void OnnxGraph::add_initializer(const std::string& name, const std::vector<float>& values,
                                const std::vector<int64_t>& dims, DType storage) {
  TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  for (int64_t d : dims) t->add_dims(d);
  std::string raw;
  if (storage == DType::f32) {
    t->set_data_type(TensorProto::FLOAT);
    raw.resize(values.size() * 4);
    std::memcpy(raw.data(), values.data(), raw.size());
  } else {
    // ONNX stores 16-bit floats as their bits, little-endian, in raw_data.
    t->set_data_type(storage == DType::f16 ? TensorProto::FLOAT16 : TensorProto::BFLOAT16);
    raw.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t bits = storage == DType::f16 ? Half(values[i]).bits : BFloat16(values[i]).bits;
      raw[2 * i] = char(bits & 0xff);
      raw[2 * i + 1] = char(bits >> 8);
    }
  }
  t->set_raw_data(raw);
}

std::string OnnxGraph::weight(const std::string& name, const Tensor& t, bool transpose) {
  std::vector<float> values = t.to_vector();
  std::vector<int64_t> dims = t.shape();
  if (transpose) {
    const int64_t rows = dims.at(0), cols = dims.at(1);
    std::vector<float> tr(values.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) tr[size_t(c * rows + r)] = values[size_t(r * cols + c)];
    values.swap(tr);
    dims = {cols, rows};
  }
  const DType storage = island_ ? DType::f32 : weights_;
  const std::string stored = unique(transpose ? name + "_t" : name);
  add_initializer(stored, values, dims, storage);
  if (storage == DType::bf16) return cast(stored, TensorProto::FLOAT);  // bf16 exports compute in f32
  return stored;
}

std::string OnnxGraph::weight_f32(const std::string& name, const Tensor& t) {
  const std::string stored = unique(name);
  add_initializer(stored, t.to_vector(), t.shape(), DType::f32);
  return stored;
}

std::string OnnxGraph::constant(const std::string& hint, const std::vector<float>& values,
                                const std::vector<int64_t>& shape) {
  const std::string name = unique(hint);
  add_initializer(name, values, shape, compute_f16_ ? DType::f16 : DType::f32);
  return name;
}

std::string OnnxGraph::constant_f32(const std::string& hint, const std::vector<float>& values,
                                    const std::vector<int64_t>& shape) {
  const std::string name = unique(hint);
  add_initializer(name, values, shape, DType::f32);
  return name;
}

std::string OnnxGraph::ints(const std::string& hint, const std::vector<int64_t>& values) {
  const std::string name = unique(hint);
  TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  t->add_dims(int64_t(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return name;
}

std::string OnnxGraph::node(const std::string& op_type, const std::vector<std::string>& inputs,
                            const std::string& hint, const std::vector<Attr>& attrs) {
  onnx::NodeProto* n = graph_->add_node();
  const std::string out = unique(hint);
  n->set_op_type(op_type);
  n->set_name(out);
  for (const std::string& in : inputs) n->add_input(in);
  n->add_output(out);
  for (const Attr& a : attrs) {
    onnx::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(*f);
    } else {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : std::get<std::vector<int64_t>>(a.value)) p->add_ints(v);
    }
  }
  return out;
}

std::string OnnxGraph::cast(const std::string& x, int32_t to) {
  return node("Cast", {x}, x + (to == TensorProto::FLOAT ? "_f32" : "_f16"), {{"to", int64_t(to)}});
}

namespace {

void describe(onnx::ValueInfoProto* v, const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
              const std::vector<std::string>& dim_names) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  size_t named = 0;
  for (int64_t d : dims) {
    onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (d < 0)
      dim->set_dim_param("batch");
    else if (d == 0)
      dim->set_dim_param(named < dim_names.size() ? dim_names[named++] : "n");
    else
      dim->set_dim_value(d);
  }
}

}  // namespace

void OnnxGraph::input(const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
                      const std::vector<std::string>& dim_names) {
  used_.insert(name);
  describe(graph_->add_input(), name, elem, dims, dim_names);
}

void OnnxGraph::output(const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
                       const std::vector<std::string>& dim_names) {
  describe(graph_->add_output(), name, elem, dims, dim_names);
}

}  // namespace mixprec::onnx_export
