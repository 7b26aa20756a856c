// infer_command.cpp: `mixprec infer --checkpoint C --dtype bf16|f16|f32`: half-precision
// inference of a trained model. The weights are converted with Module::to(dtype) (as
// model.to(torch.bfloat16) would) and run on a batch, beside the same model in f32:
// throughput, peak activation memory per image, and how far the predictions move.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "mixprec/train/weights.h"
#include "inference_messages.h"
#include "mixprec/infer/infer.h"

namespace mixprec::cli {

namespace {

struct InferFlags {
  std::string checkpoint, checkpoint_flag;
  std::string dtype = "bf16";
  int64_t batch_size = 256;
  int repeats = 10;
};

struct InferResult {
  double images_per_second = 0;
  int64_t activation_bytes_per_image = 0;
  std::vector<float> logits;  // of the first batch, f32
};

InferResult time_inference(nn::Module& model, const Tensor& input, DType dtype, int repeats) {
  NoGradGuard ng;
  const Tensor x = is_floating(input.dtype()) ? input.to(dtype) : input;  // ids stay ids
  InferResult r;
  r.logits = model(x).to(DType::f32).to_vector();  // warm-up: primitives and layouts
  reset_peak_memory();
  const int64_t base = current_bytes(MemoryCategory::activations);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor y = model(x);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
  const double median = times[times.size() / 2];
  r.images_per_second = median > 0 ? double(input.size(0)) / median : 0;
  r.activation_bytes_per_image = (peak_bytes(MemoryCategory::activations) - base) / input.size(0);
  return r;
}

int run_infer(const InferFlags& f, const std::string& given) {
  auto dtype = parse_dtype(f.dtype);
  if (!dtype || !is_floating(*dtype) || *dtype == DType::f64) {
    std::fprintf(stderr, "mixprec: usage error: --dtype: expected one of bf16, f16, f32; got '%s'\n", f.dtype.c_str());
    return kExitUsage;
  }
  if (f.batch_size < 1 || f.repeats < 1) {
    std::fprintf(stderr, "mixprec: usage error: --batch-size and --repeats must be >= 1\n");
    return kExitUsage;
  }
  // Twice, in f32: the reference, and the copy cast whole to --dtype (model.to(dtype)).
  // Built-in models and model files alike (the run's recorded model text and geometry).
  auto ref = infer::load_model(given, "fp32");
  if (!ref.is_ok()) return report_load_error(ref.status());
  auto half = infer::load_model(given, "fp32");
  if (!half.is_ok()) return report_load_error(half.status());
  const std::string* path = &ref->opened.path;
  const nn::ModelSpec* spec = &ref->spec;
  std::shared_ptr<nn::Module> ref_model = ref->model, half_model = half->model;
  half_model->to(*dtype);
  manual_seed(1);
  // Token ids for a language model or a text classifier (random bytes), else N(0, 1) images.
  Tensor input;
  if (spec->language_model || spec->token_input) {
    const int64_t T = spec->language_model ? spec->width - 1 : spec->width;
    std::vector<int64_t> ids(size_t(f.batch_size * T));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = 1 + int64_t((i * 2654435761u) % 255);
    input = Tensor::from_vector_i64(ids, {f.batch_size, T});
  } else {
    input = Tensor::normal({f.batch_size, spec->channels, spec->height, spec->width}, 0, 1);
  }
  const InferResult a = time_inference(*ref_model, input, DType::f32, f.repeats);
  const InferResult b = time_inference(*half_model, input, *dtype, f.repeats);

  // How far the 16-bit model moves: max |logit difference| and argmax agreement, per row of
  // logits (per sample; per position of a language model).
  const int64_t classes = spec->classes, rows = int64_t(a.logits.size()) / classes;
  double max_diff = 0;
  int64_t agree = 0;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t ia = 0, ib = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const size_t k = size_t(i * classes + c);
      max_diff = std::max(max_diff, double(std::fabs(a.logits[k] - b.logits[k])));
      if (a.logits[k] > a.logits[size_t(i * classes + ia)]) ia = c;
      if (b.logits[k] > b.logits[size_t(i * classes + ib)]) ib = c;
    }
    agree += ia == ib;
  }
  std::printf("checkpoint %s (model %s), batch %lld, median of %d runs\n", path->c_str(), spec->name.c_str(),
              (long long)f.batch_size, f.repeats);
  std::printf("%-6s %12s %22s\n", "dtype", "images/s", "activation bytes/image");
  std::printf("%-6s %12.0f %22lld\n", "f32", a.images_per_second, (long long)a.activation_bytes_per_image);
  std::printf("%-6s %12.0f %22lld\n", dtype_name(*dtype), b.images_per_second, (long long)b.activation_bytes_per_image);
  std::printf("speed-up %.2fx | memory %.0f%% of f32 | predictions agree on %.2f%% | max |logit diff| %.4g\n",
              a.images_per_second > 0 ? b.images_per_second / a.images_per_second : 0.0,
              a.activation_bytes_per_image > 0 ? 100.0 * double(b.activation_bytes_per_image) /
                                                     double(a.activation_bytes_per_image) : 0.0,
              100.0 * double(agree) / double(rows), max_diff);
  return kExitOk;
}

}  // namespace

Runner add_infer_command(CLI::App& app) {
  auto flags = std::make_shared<InferFlags>();
  CLI::App* cmd = app.add_subcommand("infer", "Half-precision inference of a checkpoint, beside f32");
  add_checkpoint_argument(cmd, flags->checkpoint, flags->checkpoint_flag,
                          "A .safetensors checkpoint, a run directory (its last checkpoint) or a plain "
                          "safetensors file of weights (e.g. from PyTorch)");
  cmd->add_option("--dtype", flags->dtype, "Inference dtype: bf16, f16, f32")->capture_default_str();
  cmd->add_option("--batch-size", flags->batch_size, "Images per batch")->capture_default_str();
  cmd->add_option("--repeats", flags->repeats, "Timed runs (the median is reported)")->capture_default_str();
  return [flags]() -> int {
    auto which = chosen_checkpoint(flags->checkpoint, flags->checkpoint_flag);
    if (!which) return kExitUsage;
    return run_infer(*flags, *which);
  };
}

}  // namespace mixprec::cli
