// generate_command.cpp: `mixprec generate CHECKPOINT --prompt TEXT`: text from a trained
// byte-level language model (--model gpt-tiny / gpt, or a model file ending in lm_head),
// streamed as infer::generate_text makes it, under the checkpoint's precision.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/amp/amp.h"
#include "mixprec/nn/models.h"
#include "suggest.h"
#include "inference_messages.h"
#include "mixprec/infer/infer.h"
#include "stdout_check.h"

namespace mixprec::cli {

namespace {

struct GenerateFlags {
  int threads = 0;  // --threads (0: OpenMP's choice)
  std::string checkpoint, checkpoint_flag, prompt, precision;
  int64_t max_tokens = 200, top_k = 40;
  double temperature = 0.8;
  uint64_t seed = 0;
};

int run_generate(const GenerateFlags& f, const std::string& given) {
  auto loaded = infer::load_model(given, f.precision);
  if (!loaded.is_ok()) return report_load_error(loaded.status());
  auto* gpt = dynamic_cast<nn::StepwiseLanguageModel*>(loaded->model.get());
  if (!loaded->spec.language_model || gpt == nullptr) {
    std::fprintf(stderr, "mixprec: usage error: %s holds model %s, a classifier; generate needs a language "
                 "model (train one with --model gpt-tiny, gpt or models/gpt.yaml --dataset kjv)\n",
                 loaded->opened.path.c_str(), loaded->spec.name.c_str());
    return kExitUsage;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
  // Each byte is shown as it is made; an output that cannot take it ends the generation
  // (main.cpp says why and exits 1).
  const std::string text = infer::generate_text(*gpt, loaded->preset.autocast_dtype, f.prompt,
                                                {f.max_tokens, f.temperature, f.top_k, f.seed}, [](char c) {
                                                  std::fwrite(&c, 1, 1, stdout);
                                                  return flush_stdout();
                                                });
  std::printf("\n");
  if (!flush_stdout()) return kExitRuntime;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double made = double(text.size());
  std::fprintf(stderr, "generated %lld bytes in %.2f s (%.0f bytes/s), model %s, precision %s, temperature %g, top-k %lld, seed %llu\n",
               (long long)text.size(), secs, secs > 0 ? made / secs : 0.0,
               loaded->spec.name.c_str(), loaded->preset.name.c_str(), f.temperature, (long long)f.top_k,
               (unsigned long long)f.seed);
  return kExitOk;
}

}  // namespace

Runner add_generate_command(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Sample text from a trained language model (--model gpt-tiny, gpt, or a model file ending in lm_head)");
  add_checkpoint_argument(cmd, f->checkpoint, f->checkpoint_flag,
                          "A language model's checkpoint or run directory (its last checkpoint)");
  cmd->add_option("--prompt", f->prompt, "Text to continue (default: a new line)");
  cmd->add_option("--max-tokens", f->max_tokens, "Bytes to generate")->check(integer_in(1, 1000000))->capture_default_str();
  cmd->add_option("--temperature", f->temperature, "Sampling temperature (0: always the most likely byte)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "Sample among the K most likely bytes (0: all 256)")
      ->check(integer_in(0, 256))->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the sampler (the same seed gives the same text)")
      ->check(unsigned_integer())->capture_default_str();
  cmd->add_option("--precision", f->precision, "Precision preset (default: the checkpoint's): " + amp::preset_names())
      ->check(precision_name());
  add_threads_option(cmd, f->threads);
  return [f, cmd]() -> int {
    use_threads(f->threads);
    auto which = chosen_checkpoint(f->checkpoint, f->checkpoint_flag);
    if (!which) return kExitUsage;
    return run_generate(*f, *which);
  };
}

}  // namespace mixprec::cli
