// text_generation.cpp: generate_text of mixprec/infer/infer.h: a language model's bytes, one at a
// time with its key/value cache, drawn with a temperature and top-k from a seeded generator.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "mixprec/amp/amp.h"
#include "mixprec/infer/infer.h"

namespace mixprec::infer {

namespace {

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

}  // namespace

std::string generate_text(nn::StepwiseLanguageModel& lm, std::optional<DType> autocast_dtype, const std::string& prompt,
                          const GenerationSettings& s, const std::function<bool(char)>& on_byte) {
  std::optional<amp::AutocastGuard> autocast;
  if (autocast_dtype) autocast.emplace(*autocast_dtype);
  std::mt19937_64 gen(s.seed);
  std::vector<int64_t> history;
  for (unsigned char c : prompt.empty() ? std::string("\n") : prompt) history.push_back(c);
  const int64_t context = lm.context_length();
  nn::KvCache cache;
  std::vector<double> logits;
  // Reads history[from..] into the cache; a full context starts a new cache from the last
  // half of the text (a sliding window, recomputed once per context/2 bytes).
  auto read = [&](size_t from) {
    for (size_t i = from; i < history.size(); ++i) {
      if (cache.length == context) {
        cache = nn::KvCache{};
        const size_t keep = size_t(context / 2);
        for (size_t j = i - std::min(i, keep); j < i; ++j) lm.forward_step(history[j], cache);
      }
      logits = lm.forward_step(history[i], cache).to(DType::f64).to_vector_f64();
    }
  };
  read(history.size() > size_t(context) ? history.size() - size_t(context) : 0);
  std::string out;
  for (int64_t k = 0; k < s.max_tokens; ++k) {
    const int64_t next = sample(logits, s.temperature, s.top_k, gen);
    out.push_back(char(next));
    if (on_byte && !on_byte(char(next))) break;
    history.push_back(next);
    read(history.size() - 1);
  }
  return out;
}

}  // namespace mixprec::infer
