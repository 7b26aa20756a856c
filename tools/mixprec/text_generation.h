// text_generation.h: text from a byte-level language model, one byte at a time with its
// key/value cache (nn::StepwiseLanguageModel::forward_step), sampled with a temperature and
// top-k from a seeded generator: the same prompt, settings and seed give the same bytes.
// `mixprec generate` prints them; `mixprec serve` answers POST /v1/generate with them.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "mixprec/amp.h"
#include "mixprec/models.h"

namespace mixprec::cli {

struct GenerationSettings {
  int64_t max_tokens = 200;  // bytes to generate
  double temperature = 0.8;  // 0: always the most likely byte
  int64_t top_k = 40;        // sample among the k most likely bytes (0: all 256)
  uint64_t seed = 0;
};

// The bytes that follow `prompt` (an empty prompt starts from a new line). Runs under the
// preset's autocast; a full context slides (the cache restarts from the last half of the
// text). on_byte, when given, sees each byte as it is made (streaming).
std::string generate_text(nn::StepwiseLanguageModel& lm, std::optional<DType> autocast, const std::string& prompt,
                          const GenerationSettings& settings, const std::function<void(char)>& on_byte = {});

}  // namespace mixprec::cli
