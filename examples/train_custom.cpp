// train_custom.cpp: your own model (a Module written here) on your own data (an ImageDataset
// built in memory), trained by train::run with everything the CLI's runs get: a run
// directory with config.json, metrics and checkpoints, amp-bf16, and a bit-exact resume.
// ctest runs it: it fails unless the model learns and the resumed run matches.
//
//   example_train_custom [RUN_DIR]     (default: a fresh directory under /tmp)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "mixprec/mixprec.h"

using namespace mixprec;

// A small convolutional network: conv -> relu -> global average pool -> linear.
class TinyNet : public nn::Module {
 public:
  TinyNet(int64_t channels, int64_t classes) {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(channels, 16, 3, 1, 1));
    head = register_module("head", std::make_shared<nn::Linear>(16, classes));
  }
  Tensor forward(const Tensor& x) override { return (*head)(mean(relu((*conv)(x)), {2, 3})); }
  const char* type_name() const override { return "TinyNet"; }
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Linear> head;
};

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "";
  if (dir.empty()) {
    char tmpl[] = "/tmp/mixprec_custom_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return 1;
    dir = std::string(tmpl) + "/run";
  }
  // Your data: here 4 classes of 1x12x12 synthetic images (make_synthetic), split 600 / 200.
  ImageDataset all = make_synthetic(800, 1, 12, 12, 4, /*seed=*/3);
  train::Custom custom;
  custom.model_name = "tinynet";
  custom.make_model = [] { return std::make_shared<TinyNet>(1, 4); };
  custom.train = std::make_shared<ImageDataset>(all.subset(600));
  auto test = std::make_shared<ImageDataset>(all);
  const int64_t sb = all.sample_bytes();
  test->images.assign(all.images.begin() + 600 * sb, all.images.end());
  test->labels.assign(all.labels.begin() + 600, all.labels.end());
  test->count = 200;
  custom.test = test;

  train::TrainConfig config;
  config.precision = "amp-bf16";
  config.batch_size = 32;
  config.epochs = 3;
  config.lr = 1e-2;
  config.run_dir = dir;
  config.overwrite = true;  // a run left by an earlier invocation is replaced
  auto first = train::run(config, custom);
  if (!first.is_ok()) {
    std::fprintf(stderr, "train: %s\n", first.status().message().c_str());
    return 1;
  }
  std::printf("3 epochs: test accuracy %.1f%% (run directory %s)\n", 100 * first->final_accuracy, dir.c_str());

  // Continue to 8 epochs from the run directory, with the same Custom.
  train::TrainConfig more = config;
  more.run_dir.clear();
  more.overwrite = false;
  more.resume = dir;
  more.epochs = 8;
  auto resumed = train::run(more, custom);
  if (!resumed.is_ok()) {
    std::fprintf(stderr, "resume: %s\n", resumed.status().message().c_str());
    return 1;
  }
  std::printf("resumed to 8 epochs: test accuracy %.1f%%, first step %lld\n", 100 * resumed->final_accuracy,
              (long long)resumed->first_step);
  // The same 8 epochs without stopping: bit-identical losses after the resume point.
  train::TrainConfig straight = config;
  straight.run_dir = dir + "-straight";
  straight.epochs = 8;
  auto whole = train::run(straight, custom);
  if (!whole.is_ok()) return 1;
  const size_t from = size_t(resumed->first_step - 1);
  bool same = whole->losses.size() == from + resumed->losses.size();
  for (size_t i = 0; same && i < resumed->losses.size(); ++i) same = whole->losses[from + i] == resumed->losses[i];
  std::printf("resumed losses %s the uninterrupted run's\n", same ? "equal" : "DIFFER FROM");
  if (!same || resumed->final_accuracy < 0.8) return 1;
  return 0;
}
