// generate_command.cpp: `mixprec generate CHECKPOINT --prompt TEXT`: text from a trained
// byte-level language model (--model gpt-tiny / gpt, or a model file ending in lm_head), one
// byte at a time with the model's key/value cache (nn::StepwiseLanguageModel::forward_step), sampled with a temperature and top-k from a
// seeded generator (the same seed gives the same text), under the checkpoint's precision.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/amp.h"
#include "mixprec/models.h"
#include "suggest.h"
#include "weights_file.h"

namespace mixprec::cli {

namespace {

struct GenerateFlags {
  std::string checkpoint, checkpoint_flag, prompt, precision;
  int64_t max_tokens = 200, top_k = 40;
  double temperature = 0.8;
  uint64_t seed = 0;
};

// The next byte: the most likely at temperature 0; else drawn from softmax(logits / T) over
// the top_k most likely bytes (0: all), with u from the top 53 bits of one 64-bit draw.
int64_t sample(const std::vector<double>& logits, double temperature, int64_t top_k, std::mt19937_64& gen) {
  const int64_t n = int64_t(logits.size());
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[size_t(i)] > logits[size_t(best)]) best = i;
  if (temperature == 0.0) return best;
  double threshold = -INFINITY;
  if (top_k > 0 && top_k < n) {
    std::vector<double> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
    threshold = sorted[size_t(top_k - 1)];
  }
  std::vector<double> p(size_t(n), 0.0);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (logits[size_t(i)] >= threshold) total += p[size_t(i)] = std::exp((logits[size_t(i)] - logits[size_t(best)]) / temperature);
  const double u = double(gen() >> 11) * 0x1.0p-53 * total;
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    acc += p[size_t(i)];
    if (p[size_t(i)] > 0 && u < acc) return i;
  }
  return best;  // rounding at the very end of the sum
}

int run_generate(const GenerateFlags& f, const std::string& given) {
  auto loaded = load_model(given, f.precision);
  if (!loaded.is_ok()) return report_load_error(loaded.status());
  auto* gpt = dynamic_cast<nn::StepwiseLanguageModel*>(loaded->model.get());
  if (!loaded->spec.language_model || gpt == nullptr) {
    std::fprintf(stderr, "mixprec: usage error: %s holds model %s, a classifier; generate needs a language "
                 "model (train one with --model gpt-tiny, gpt or models/gpt.yaml --dataset kjv)\n",
                 loaded->opened.path.c_str(), loaded->spec.name.c_str());
    return kExitUsage;
  }
  std::optional<amp::AutocastGuard> autocast;
  if (loaded->preset.autocast_dtype) autocast.emplace(*loaded->preset.autocast_dtype);
  std::mt19937_64 gen(f.seed);
  std::vector<int64_t> history;
  for (unsigned char c : f.prompt.empty() ? std::string("\n") : f.prompt) history.push_back(c);
  nn::KvCache cache;
  std::vector<double> logits;
  // Reads history[from..] into the cache; a full context starts a new cache from the last
  // half of the text (a sliding window, recomputed once per context/2 bytes).
  auto read = [&](size_t from) {
    for (size_t i = from; i < history.size(); ++i) {
      if (cache.length == gpt->context_length()) {
        cache = nn::KvCache{};
        const size_t keep = size_t(gpt->context_length() / 2);
        for (size_t j = i - std::min(i, keep); j < i; ++j) gpt->forward_step(history[j], cache);
      }
      logits = gpt->forward_step(history[i], cache).to(DType::f64).to_vector_f64();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  read(history.size() > size_t(gpt->context_length()) ? history.size() - size_t(gpt->context_length()) : 0);
  std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
  for (int64_t k = 0; k < f.max_tokens; ++k) {
    const int64_t next = sample(logits, f.temperature, f.top_k, gen);
    const char c = char(next);
    std::fwrite(&c, 1, 1, stdout);
    std::fflush(stdout);
    history.push_back(next);
    read(history.size() - 1);
  }
  std::printf("\n");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "generated %lld bytes in %.2f s (%.0f bytes/s), model %s, precision %s, temperature %g, top-k %lld, seed %llu\n",
               (long long)f.max_tokens, secs, secs > 0 ? double(f.max_tokens) / secs : 0.0,
               loaded->spec.name.c_str(), loaded->preset.name.c_str(), f.temperature, (long long)f.top_k,
               (unsigned long long)f.seed);
  return kExitOk;
}

}  // namespace

Runner add_generate_command(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Sample text from a trained language model (--model gpt-tiny, gpt)");
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
  return [f, cmd]() -> int {
    auto which = chosen_checkpoint(f->checkpoint, f->checkpoint_flag);
    if (!which) return kExitUsage;
    return run_generate(*f, *which);
  };
}

}  // namespace mixprec::cli
