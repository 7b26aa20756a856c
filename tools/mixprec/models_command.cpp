// models_command.cpp: `mixprec models`: the built-in models and the model files at hand
// (models/ in the current directory, and the installed examples), with their parameters.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"

namespace mixprec::cli {
namespace {

// The folders where model files live: ./models and <prefix>/share/mixprec/models next to the
// installed binary (<prefix>/bin/mixprec).
std::vector<std::string> model_dirs() {
  std::vector<std::string> dirs = {"models"};
  char exe[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string bin(exe, size_t(n));
    bin = bin.substr(0, bin.rfind('/'));
    dirs.push_back(bin.substr(0, bin.rfind('/')) + "/share/mixprec/models");
  }
  return dirs;
}

std::vector<std::string> model_files(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return files;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.' && nn::is_model_file(e->d_name)) files.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

int run_models() {
  std::printf("%-40s %-12s %12s\n", "built-in model (--model NAME)", "input", "parameters");
  for (const std::string& name : nn::model_names()) {
    const nn::ModelSpec spec = nn::model_spec(name).value();
    const std::string input = spec.language_model ? "text, ctx " + std::to_string(spec.width - 1)
                                                  : std::to_string(spec.channels) + "x" + std::to_string(spec.height) +
                                                        "x" + std::to_string(spec.width);
    std::printf("%-40s %-12s %12lld\n", name.c_str(), input.c_str(), (long long)nn::make_model(spec)->num_parameters());
  }
  bool any = false;
  for (const std::string& dir : model_dirs())
    for (const std::string& file : model_files(dir)) {
      if (!any) std::printf("\n%-40s %-12s %12s\n", "model file (--model FILE)", "input", "parameters");
      any = true;
      auto text = nn::read_model_file(file);
      // Shown for Fashion-MNIST's images, for texts of 128 bytes (--max-tokens' default), or
      // for a language model's own context.
      StatusOr<std::shared_ptr<nn::Module>> model = text.status();
      std::string input;
      if (text.is_ok()) {
        const nn::ModelSpec spec = nn::model_file_spec(file, *text);
        input = spec.language_model ? "text, ctx " + std::to_string(spec.width - 1)
                : spec.token_input  ? "text, 128 B"
                                    : "1x28x28";
        model = nn::build_model(spec);
      }
      if (model.is_ok())
        std::printf("%-40s %-12s %12lld\n", file.c_str(), input.c_str(), (long long)(*model)->num_parameters());
      else
        std::printf("%-40s %s\n", file.c_str(), model.status().message().c_str());
    }
  std::printf("\nA model file takes the data's input and classes; `mixprec summary --model FILE` shows its layers "
              "(docs/models.md).\n");
  return kExitOk;
}

}  // namespace

Runner add_models_command(CLI::App& app) {
  app.add_subcommand("models", "List the built-in models and the model files at hand, with their parameters");
  return [] { return run_models(); };
}

}  // namespace mixprec::cli
