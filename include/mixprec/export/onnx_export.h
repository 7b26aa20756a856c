// onnx_export.h: a trained model as an ONNX file (opset 17), for runtimes other than mixprec
// (ONNX Runtime, OpenCV's dnn module, TensorRT, ...). Written with Debian's libonnx (the
// ONNX protobuf) and checked with onnx's own checker and strict shape inference before the
// file is written (atomically).
//
// The graph is the model in eval mode, with the run's input normalisation in front and the
// class probabilities behind, so that it takes what `mixprec predict` takes:
//   input          f32 [batch, C, H, W]: values as the dataset stores them (pixels / 255,
//                  raw table features); (x - mean) / std per channel is the graph's first step
//   tokens         i64 [batch, T], 1 <= T <= context (language models, instead of input)
//   logits         f32 [batch, classes] ([batch, T, 256] for a language model)
//   probabilities  f32, softmax of logits over the classes
// Precisions (what `predict --precision` means, in ONNX's terms):
//   fp32  everything f32.
//   fp16  weights stored in f16 and the layers computed in f16; normalisation layers (their
//         parameters kept f32), softmax and the input normalisation computed in f32, with
//         Cast nodes around them, as mixprec's o2-fp16 does. Input and outputs stay f32.
//   bf16  weights stored in bf16 (half the file), each cast to f32 where it is used, and the
//         layers computed in f32: ONNX opset 17 has no bf16 Conv, so a bf16 graph would not be
//         runnable everywhere. Values therefore differ from mixprec's o2-bf16 by bf16 rounding
//         of the activations only.
// A batch dimension named "batch" is left symbolic; the batch statistics of BatchNorm are
// the running ones (eval mode).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/nn/models.h"
#include "mixprec/core/status.h"

namespace mixprec::onnx_export {

struct ExportOptions {
  DType precision = DType::f32;  // f32, f16 or bf16
  // Per-channel input normalisation (the run's statistics); empty for a language model.
  std::vector<double> mean, stddev;
  // Written as the model's metadata_props (class names, the source checkpoint, ...).
  std::map<std::string, std::string> metadata;
  std::string producer_version;  // mixprec's version
};

// The ONNX file's bytes (a serialised ModelProto). Errors: invalid_argument naming the module
// when the model holds a layer the exporter does not know (a custom Module), or when options
// do not fit the model (normalisation of the wrong length); internal when onnx's checker
// refuses the graph (a bug of the exporter: the message carries the checker's).
StatusOr<std::string> export_onnx(nn::Module& model, const nn::ModelSpec& spec, const ExportOptions& options);

// export_onnx, written atomically to path (io_error naming the path on failure).
Status write_onnx(nn::Module& model, const nn::ModelSpec& spec, const ExportOptions& options,
                  const std::string& path);

}  // namespace mixprec::onnx_export
