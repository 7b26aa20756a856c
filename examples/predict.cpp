// predict.cpp: a trained model put to use from C++ with mixprec/infer/infer.h, the code behind
// `mixprec predict`, `serve` and `generate`:
//
//   example_predict CHECKPOINT_OR_RUN_DIR [PROMPT]
//
// opens the checkpoint (or a run directory's last one) and prints the top-3 classes of a few
// samples, or for a language model the text that follows PROMPT. Without arguments it first
// trains a small classifier for a few steps (synthetic data) into ./predict_run and opens
// that, so that ctest can run it anywhere. Exit 0 when the answers are probabilities.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

using namespace mixprec;

namespace {

// A few training steps of a two-layer network on 1x28x28 synthetic images, into run_dir.
bool train_small_run(const std::string& run_dir) {
  const std::string model_file = run_dir + ".yaml";
  std::ofstream(model_file) << "name: small\nlayers:\n  - flatten\n  - linear: {out: 32}\n  - relu\n"
                               "  - linear: {out: classes}\n";
  train::TrainConfig config;
  config.model = model_file;
  config.dataset = "synthetic";
  config.precision = "fp32";
  config.max_steps = 20;
  config.batch_size = 64;
  config.run_dir = run_dir;
  config.overwrite = true;
  auto trained = train::run(config);
  if (!trained.is_ok()) std::fprintf(stderr, "training failed: %s\n", trained.status().message().c_str());
  return trained.is_ok();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string checkpoint = argc > 1 ? argv[1] : "predict_run";
  if (argc <= 1 && !train_small_run(checkpoint)) return 1;

  // The checkpoint's model in its own precision ("bf16" instead of "" casts its weights once).
  auto predictor = infer::Predictor::open(checkpoint, "");
  if (!predictor.is_ok()) {
    std::fprintf(stderr, "%s\n", predictor.status().message().c_str());
    return 1;
  }
  const infer::LoadedModel& loaded = predictor->loaded();
  std::printf("%s: model %s, precision %s, %lld parameters\n", loaded.opened.path.c_str(), loaded.spec.name.c_str(),
              loaded.preset.name.c_str(), static_cast<long long>(predictor->parameter_count()));

  if (loaded.spec.language_model) {  // text: one byte at a time, with the model's key/value cache
    auto* lm = dynamic_cast<nn::StepwiseLanguageModel*>(loaded.model.get());
    const infer::GenerationSettings settings{.max_tokens = 80, .temperature = 0.8, .top_k = 40, .seed = 1};
    const std::string prompt = argc > 2 ? argv[2] : "And God said";
    const std::string text = infer::generate_text(*lm, loaded.preset.autocast_dtype, prompt, settings);
    std::printf("%s%s\n", prompt.c_str(), text.c_str());
    return text.size() == 80 ? 0 : 1;
  }

  // Samples as the datasets store them (pixels / 255), back to back; the Predictor applies the
  // run's normalisation and returns each sample's class probabilities.
  const int64_t per_sample = predictor->layout().values_per_sample(), n = 3;
  manual_seed(1);
  const std::vector<float> samples = Tensor::uniform({n * per_sample}, 0.0, 1.0).to_vector();
  const std::vector<std::vector<float>> probabilities = predictor->probabilities(samples, n);
  bool sums_to_one = true;
  for (int64_t i = 0; i < n; ++i) {
    std::printf("sample %lld:", static_cast<long long>(i));
    for (const infer::TopClass& t : predictor->top(probabilities[size_t(i)], 3))
      std::printf("  %s (%.3f)", t.name.c_str(), t.probability);
    std::printf("\n");
    double total = 0;
    for (float p : probabilities[size_t(i)]) total += p;
    sums_to_one = sums_to_one && std::fabs(total - 1.0) < 1e-4;
  }
  return sums_to_one ? 0 : 1;
}
