// predict_text.h: `mixprec predict` for a language model: the next byte after a prompt.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/infer/infer.h"

namespace mixprec::cli {

// The top_k next bytes after each prompt (--prompt TEXT values, then each .txt file's text),
// with their probabilities (infer::Predictor: softmax in f32), from the prompt's last
// `context` bytes, printed
// as format says ("table", "json" or "csv"). Exit 2 for an empty prompt, a file that is not
// .txt or a model that is not a language model; the file's error code when it cannot be read.
int run_predict_text(const infer::Predictor& predictor, const std::vector<std::string>& prompts,
                     const std::vector<std::string>& files, int64_t top_k, const std::string& format);

}  // namespace mixprec::cli
