// model_names.cpp: the names of the built-in models (models.h), apart from the models
// themselves so that what only needs the names (the settings table, and so the config
// parsers and their fuzz harness) does not link every layer.
#include "mixprec/models.h"

namespace mixprec::nn {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"cnn",      "seed-cnn",       "mlp",      "transformer",
                                                "resnet20", "resnet20-cifar", "gpt-tiny", "gpt"};
  return names;
}

}  // namespace mixprec::nn
