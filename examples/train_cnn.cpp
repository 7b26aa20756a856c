// train_cnn.cpp: trains the Fashion-MNIST CNN for one epoch in amp-bf16 through the
// library's training loop, printing progress and the test accuracy.
#include <cstdio>
#include <cstdlib>

#include "mixprec/mixprec.h"

int main(int argc, char** argv) {
  mixprec::train::TrainConfig config;
  config.model = "cnn";
  config.precision = "amp-bf16";
  config.epochs = 1;
  if (argc > 1) config.max_steps = std::atoll(argv[1]);  // e.g. 50 for a quick look
  mixprec::train::Callbacks cb;
  cb.on_step = [](const mixprec::train::StepReport& r) {
    if (r.step % 50 == 0 || r.step == r.total_steps)
      std::printf("step %lld/%lld  loss %.4f  %.0f img/s\n", (long long)r.step,
                  (long long)r.total_steps, r.loss, r.images_per_second);
  };
  cb.on_eval = [](const mixprec::train::EvalReport& e) {
    std::printf("test accuracy %.2f%%\n", 100 * e.accuracy);
  };
  auto result = mixprec::train::run(config, cb);
  if (!result.is_ok()) {
    std::fprintf(stderr, "error: %s\n", result.status().message().c_str());
    return 1;
  }
  return 0;
}
