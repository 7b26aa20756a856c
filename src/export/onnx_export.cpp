// export/onnx_export.cpp: the model as an ONNX ModelProto (see onnx_export.h): graph inputs
// and the input normalisation, the layers (onnx_layers.cpp), logits and probabilities, then
// onnx's checker and strict shape inference, so that a file mixprec writes is one every ONNX
// runtime accepts.
#include "mixprec/export/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <exception>

#include "export/onnx_graph.h"
#include "export/onnx_layers.h"
#include "io/atomic_file.h"
#include "mixprec/autograd/autograd.h"

namespace mixprec::onnx_export {

using onnx::TensorProto;

namespace {

constexpr int64_t kOpset = 17;  // the newest onnx 1.12 (Debian 12) knows: LayerNormalization
constexpr int64_t kIrVersion = 8;

Status check_options(const nn::ModelSpec& spec, const ExportOptions& options) {
  if (options.precision != DType::f32 && options.precision != DType::f16 && options.precision != DType::bf16)
    return Status::invalid_argument(std::string("ONNX export: precision ") + dtype_name(options.precision) +
                                    " (expected f32, f16 or bf16)");
  if (spec.language_model || spec.token_input) return Status::ok();  // byte ids in: no normalisation
  const size_t c = size_t(spec.channels);
  if (options.mean.size() != c || options.stddev.size() != c)
    return Status::invalid_argument("ONNX export: the input normalisation has " + std::to_string(options.mean.size()) +
                                    " means and " + std::to_string(options.stddev.size()) +
                                    " standard deviations; the model takes " + std::to_string(c) + " channels");
  for (size_t i = 0; i < c; ++i)
    if (!std::isfinite(options.mean[i]) || !std::isfinite(options.stddev[i]) || !(options.stddev[i] > 0))
      return Status::invalid_argument("ONNX export: channel " + std::to_string(i) + "'s normalisation (mean " +
                                      std::to_string(options.mean[i]) + ", std " + std::to_string(options.stddev[i]) +
                                      ") must be finite with std > 0");
  return Status::ok();
}

}  // namespace

StatusOr<std::string> export_onnx(nn::Module& model, const nn::ModelSpec& spec, const ExportOptions& options) {
  MIXPREC_RETURN_IF_ERROR(check_options(spec, options));
  const bool was_training = model.is_training();
  model.eval();  // the export reads eval-mode behaviour; the caller's mode is restored below
  onnx::ModelProto proto;
  proto.set_ir_version(kIrVersion);
  proto.set_producer_name("mixprec");
  proto.set_producer_version(options.producer_version);
  proto.set_doc_string("mixprec " + spec.name + " model, " + dtype_name(options.precision) + " weights");
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  for (const auto& [key, value] : options.metadata) {
    onnx::StringStringEntryProto* e = proto.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  }
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(spec.name.empty() ? "mixprec_model" : spec.name);
  OnnxGraph g(graph, options.precision);
  LayerEmitter layers(g);

  StatusOr<Value> logits = Status::internal("unset");
  try {
    if (spec.language_model) {
      g.input("tokens", TensorProto::INT64, {-1, 0}, {"T"});
      logits = layers.module(model, "", Value{"tokens", 2});
    } else if (spec.token_input) {  // a text classifier: `width` byte ids per text, 0-padded
      g.input("tokens", TensorProto::INT64, {-1, spec.width});
      logits = layers.module(model, "", Value{"tokens", 2});
    } else {
      g.input("input", TensorProto::FLOAT, {-1, spec.channels, spec.height, spec.width});
      // (x - mean) / std per channel, in f32, as `predict` normalises before the model. Written
      // as a BatchNormalization (unit scale, no shift, variance std^2, epsilon 0): the same
      // arithmetic, which every runtime supports, where Sub/Div by a [1, C, 1, 1] constant made
      // OpenCV 4.6's dnn fail on colour images at batch > 1 (issue 31).
      const int64_t c = spec.channels;
      std::vector<float> mean(options.mean.begin(), options.mean.end()), variance;
      for (double s : options.stddev) variance.push_back(float(s * s));
      const std::string normalised = g.node(
          "BatchNormalization",
          {"input", g.constant_f32("norm_scale", std::vector<float>(size_t(c), 1.0f), {c}),
           g.constant_f32("norm_shift", std::vector<float>(size_t(c), 0.0f), {c}), g.constant_f32("norm_mean", mean, {c}),
           g.constant_f32("norm_variance", variance, {c})},
          "normalised", {{"epsilon", 0.0f}});
      logits = layers.module(model, "", Value{g.to_compute(normalised), 4});
    }
  } catch (const std::exception& e) {  // a malformed model (a shape narrow() refuses)
    model.train(was_training);
    return Status::invalid_argument(std::string("ONNX export: ") + e.what());
  }
  model.train(was_training);
  if (!logits.is_ok()) return logits.status();

  const std::string out = g.node("Identity", {g.to_f32(logits->name)}, "logits");
  g.node("Softmax", {out}, "probabilities", {{"axis", int64_t(-1)}});
  if (spec.language_model) {
    g.output("logits", TensorProto::FLOAT, {-1, 0, spec.classes}, {"T"});
    g.output("probabilities", TensorProto::FLOAT, {-1, 0, spec.classes}, {"T"});
  } else {
    g.output("logits", TensorProto::FLOAT, {-1, spec.classes});
    g.output("probabilities", TensorProto::FLOAT, {-1, spec.classes});
  }

  // onnx's own checks: well-formed graph (checker), and every node's types and shapes
  // agreeing with its schema and with the declared outputs (strict shape inference).
  try {
    onnx::checker::check_model(proto);
    onnx::ModelProto inferred = proto;
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict=*/1));
  } catch (const std::exception& e) {
    return Status::internal(std::string("ONNX export: onnx's checker refused the graph (an exporter bug): ") + e.what());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) return Status::internal("ONNX export: the model could not be serialised");
  return bytes;
}

Status write_onnx(nn::Module& model, const nn::ModelSpec& spec, const ExportOptions& options, const std::string& path) {
  auto bytes = export_onnx(model, spec, options);
  if (!bytes.is_ok()) return bytes.status();
  auto writer = io::AtomicFileWriter::create(path);
  if (!writer.is_ok()) return writer.status();
  MIXPREC_RETURN_IF_ERROR((*writer)->write(bytes->data(), bytes->size()));
  return (*writer)->commit();
}

}  // namespace mixprec::onnx_export
