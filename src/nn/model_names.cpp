// model_names.cpp: the names of the built-in models (models.h) and what names a model file
// (model_file.h), apart from the models themselves so that what only needs the names (the
// settings table, and so the config parsers and their fuzz harness) does not link every layer.
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"

namespace mixprec::nn {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"cnn",      "seed-cnn",       "mlp",      "transformer",
                                                "resnet20", "resnet20-cifar", "gpt-tiny", "gpt"};
  return names;
}

bool is_model_file(const std::string& model) {
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    const size_t n = std::char_traits<char>::length(ext);
    if (model.size() > n && model.compare(model.size() - n, n, ext) == 0) return true;
  }
  return false;
}

}  // namespace mixprec::nn
