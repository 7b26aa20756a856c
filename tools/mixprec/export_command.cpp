// export_command.cpp: `mixprec export CHECKPOINT -o model.onnx [--precision fp32|fp16|bf16]`:
// the checkpoint's model as an ONNX file for other runtimes (mixprec/export/onnx_export.h says what
// the graph takes and returns). The weights are read in f32 and cast once by the exporter;
// the input normalisation and class names the run recorded go into the file.
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/export/onnx_export.h"
#include "inference_messages.h"
#include "mixprec/infer/infer.h"
#include "suggest.h"

namespace mixprec::cli {

namespace {

struct ExportFlags {
  std::string checkpoint, checkpoint_flag, output = "model.onnx", format = "onnx", precision = "fp32";
  bool force = false;
};

DType export_dtype(const std::string& precision) {
  if (precision == "fp16") return DType::f16;
  if (precision == "bf16") return DType::bf16;
  return DType::f32;
}

std::string shape_text(const nn::ModelSpec& spec) {
  if (spec.language_model) return "tokens i64 [batch, T <= " + std::to_string(spec.width - 1) + "]";
  if (spec.token_input)
    return "tokens i64 [batch, " + std::to_string(spec.width) + "]: each text's first " + std::to_string(spec.width) +
           " bytes, 0-padded (as predict reads them)";
  return "input f32 [batch, " + std::to_string(spec.channels) + ", " + std::to_string(spec.height) + ", " +
         std::to_string(spec.width) + "]";
}

int run_export(const ExportFlags& f, const std::string& checkpoint) {
  struct stat st {};
  if (!f.force && ::stat(f.output.c_str(), &st) == 0) {
    std::fprintf(stderr, "mixprec: usage error: export: %s already exists (pass --force to replace it)\n", f.output.c_str());
    return kExitUsage;
  }
  // f32 weights (the exporter casts them once to the chosen precision), and the run's
  // normalisation and class names as `predict` uses them.
  auto predictor = infer::Predictor::open(checkpoint, "fp32");
  if (!predictor.is_ok()) return report_predictor_error(predictor.status());
  const infer::LoadedModel& loaded = predictor->loaded();
  onnx_export::ExportOptions options;
  options.precision = export_dtype(f.precision);
  options.producer_version = "0.1.0";
  const std::vector<std::string>& class_names = predictor->class_names();
  if (!loaded.spec.language_model && !loaded.spec.token_input) {
    options.mean = predictor->mean();
    options.stddev = predictor->stddev();
    options.metadata["mixprec.normalization"] =
        nlohmann::json{{"mean", options.mean}, {"std", options.stddev}, {"input_scale", "as the dataset stores values: pixels / 255"}}.dump();
  }
  options.metadata["mixprec.model"] = loaded.spec.name;
  options.metadata["mixprec.precision"] = f.precision;
  options.metadata["mixprec.trained_with"] = loaded.config.precision;
  options.metadata["mixprec.source"] = loaded.opened.path;
  if (!class_names.empty()) options.metadata["mixprec.class_names"] = nlohmann::json(class_names).dump();

  const Status written = onnx_export::write_onnx(*loaded.model, loaded.spec, options, f.output);
  if (!written.is_ok()) {
    std::fprintf(stderr, "mixprec: export error: %s\n", written.message().c_str());
    return exit_code_for(written);
  }
  ::stat(f.output.c_str(), &st);
  std::printf("wrote %s: ONNX opset 17, %s weights, %.2f MB, %lld parameters (onnx checker and shape inference passed)\n",
              f.output.c_str(), f.precision.c_str(), double(st.st_size) / 1e6,
              static_cast<long long>(loaded.model->num_parameters()));
  std::printf("  model %s from %s\n  in:  %s\n  out: logits f32, probabilities f32 (softmax)\n", loaded.spec.name.c_str(),
              loaded.opened.path.c_str(), shape_text(loaded.spec).c_str());
  return kExitOk;
}

}  // namespace

Runner add_export_command(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand("export", "Write a checkpoint's model as an ONNX file (for ONNX Runtime, OpenCV dnn, ...)");
  add_checkpoint_argument(cmd, flags->checkpoint, flags->checkpoint_flag,
                          "A .safetensors checkpoint, a run directory or a plain weights file");
  cmd->add_option("-o,--output", flags->output, "The ONNX file to write")->capture_default_str();
  cmd->add_option("--format", flags->format, "Export format: onnx")
      ->check(one_of({"onnx"}))
      ->capture_default_str();
  cmd->add_option("--precision", flags->precision,
                  "fp32; fp16 (f16 weights and compute, normalisation and softmax in f32); bf16 (bf16 weights, "
                  "computed in f32: ONNX has no bf16 Conv)")
      ->check(one_of({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--force", flags->force, "Replace the output file if it exists");
  return [flags]() -> int {
    const auto checkpoint = chosen_checkpoint(flags->checkpoint, flags->checkpoint_flag);
    if (!checkpoint) return kExitUsage;
    return run_export(*flags, *checkpoint);
  };
}

}  // namespace mixprec::cli
