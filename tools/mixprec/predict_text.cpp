// predict_text.cpp: see predict_text.h. The same forward pass as training's (the model on
// the whole prompt, under the checkpoint's preset: infer::Predictor, as serve's), its last
// position's logits as probabilities: the distribution `generate` samples from with its
// key/value cache.
#include "predict_text.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "exit_codes.h"
#include "mixprec/io/files.h"
#include "mixprec/nn/models.h"

namespace mixprec::cli {

using infer::byte_name;

int run_predict_text(const infer::Predictor& predictor, const std::vector<std::string>& given_prompts,
                     const std::vector<std::string>& files, int64_t top_k, const std::string& format) {
  const infer::LoadedModel& loaded = predictor.loaded();
  auto* gpt = dynamic_cast<nn::StepwiseLanguageModel*>(loaded.model.get());
  if (gpt == nullptr) {
    std::fprintf(stderr, "mixprec: usage error: predict: %s holds a %s, not a language model\n", loaded.opened.path.c_str(),
                 loaded.spec.name.c_str());
    return kExitUsage;
  }
  std::vector<std::pair<std::string, std::string>> prompts;  // (source, text)
  for (size_t i = 0; i < given_prompts.size(); ++i) prompts.emplace_back("prompt " + std::to_string(i + 1), given_prompts[i]);
  for (const std::string& path : files) {
    if (path.size() < 4 || path.compare(path.size() - 4, 4, ".txt") != 0) {
      std::fprintf(stderr, "mixprec: usage error: predict: %s: a language model reads text: give --prompt TEXT or a .txt file\n",
                   path.c_str());
      return kExitUsage;
    }
    auto text = io::read_regular_file(path, "prompt file", 64 << 20);
    if (!text.is_ok()) {
      std::fprintf(stderr, "mixprec: data error: %s\n", text.status().message().c_str());
      return exit_code_for(text.status());
    }
    prompts.emplace_back(path, std::move(text).value());
  }
  for (const auto& [source, text] : prompts)
    if (text.empty()) {
      std::fprintf(stderr, "mixprec: usage error: predict: %s is empty: a prompt needs at least one byte\n", source.c_str());
      return kExitUsage;
    }
  nlohmann::json records = nlohmann::json::array();
  if (format == "table") std::printf("%-40s %s\n", "input", "next byte (probability)");
  if (format == "csv") std::printf("input,rank,class,name,probability\n");
  for (const auto& [source, text] : prompts) {
    const size_t t = std::min(text.size(), size_t(gpt->context_length()));
    const std::vector<float> p =
        predictor.probabilities(infer::next_byte_sample(text, predictor.layout().width), 1).front();
    const std::vector<int64_t> order = infer::top_indices(p, top_k);
    nlohmann::json top = nlohmann::json::array();
    std::string line;
    for (size_t r = 0; r < order.size(); ++r) {
      const int64_t b = order[r];
      const double prob = p[size_t(b)];
      top.push_back({{"class", b}, {"name", byte_name(b)}, {"probability", prob}});
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s (%.3f)", r ? ", " : "", byte_name(b).c_str(), prob);
      line += buf;
      if (format == "csv")
        std::printf("\"%s\",%lld,%lld,\"%s\",%.6g\n", source.c_str(), (long long)(r + 1), (long long)b, byte_name(b).c_str(),
                    prob);
    }
    if (format == "table") std::printf("%-40s %s\n", source.c_str(), line.c_str());
    if (format == "json") records.push_back({{"input", source}, {"context_bytes", t}, {"top", top}});
  }
  if (format == "json") {
    nlohmann::json doc = {{"checkpoint", loaded.opened.path}, {"model", loaded.spec.name},
                          {"precision", loaded.preset.name}, {"predictions", records}};
    std::printf("%s\n", doc.dump(2).c_str());
  }
  return kExitOk;
}

}  // namespace mixprec::cli
