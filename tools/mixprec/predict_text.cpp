// predict_text.cpp: see predict_text.h. The same forward pass as training's (the model on
// the whole prompt, under the checkpoint's preset), its last position's logits as
// probabilities: the distribution `generate` samples from with its key/value cache.
#include "predict_text.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "exit_codes.h"
#include "mixprec/amp.h"
#include "mixprec/autograd.h"
#include "mixprec/files.h"
#include "mixprec/models.h"
#include "mixprec/ops.h"
#include "prediction.h"

namespace mixprec::cli {

namespace {

}  // namespace

int run_predict_text(const LoadedModel& loaded, const std::vector<std::string>& given_prompts,
                     const std::vector<std::string>& files, int64_t top_k, const std::string& format) {
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
    std::vector<int64_t> tokens;
    for (size_t i = text.size() - t; i < text.size(); ++i) tokens.push_back(int64_t(static_cast<unsigned char>(text[i])));
    std::vector<float> p;
    {
      NoGradGuard no_grad;
      std::optional<amp::AutocastGuard> autocast;
      if (loaded.preset.autocast_dtype) autocast.emplace(*loaded.preset.autocast_dtype);
      const Tensor logits = loaded.model->forward(Tensor::from_vector_i64(tokens, {1, int64_t(t)})).to(DType::f32);
      const Tensor last = reshape(narrow(reshape(logits, {int64_t(t), logits.size(2)}), int64_t(t) - 1, 1), {logits.size(2)});
      p = softmax(last, 0).to_vector();  // in f32 whatever the preset
    }
    const std::vector<int64_t> order = top_indices(p, top_k);
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
