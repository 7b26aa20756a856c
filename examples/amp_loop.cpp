// amp_loop.cpp: the minimal mixed-precision training loop: autocast f16 around the
// forward pass, a GradScaler around backward and step. Same shape as PyTorch's recipe.
#include <cstdio>

#include "mixprec/mixprec.h"

using namespace mixprec;

int main() {
  manual_seed(0);
  const Tensor x = Tensor::normal({256, 64}, 0.0, 1.0);
  const Tensor y = Tensor::from_vector_i64(std::vector<int64_t>(256, 3), {256});
  nn::Sequential model({std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(128, 10)});
  optim::Adam opt(model.parameters());
  amp::GradScaler scaler;  // init_scale 65536, growth 2, backoff 0.5, interval 2000

  for (int step = 1; step <= 50; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(DType::f16);  // linear runs in f16, the loss in f32
      loss = cross_entropy(model(x), y);
    }
    scaler.scale(loss).backward();  // scaled so small f16 gradients survive
    scaler.unscale(opt);            // optional: clip on true gradients
    optim::clip_grad_norm_(opt.params(), 1.0);
    scaler.step(opt);               // skipped if any gradient is inf/NaN
    scaler.update();
    if (step % 10 == 0)
      std::printf("step %2d  loss %.4f  scale %g  skipped %lld\n", step, loss.item(),
                  scaler.get_scale(), (long long)scaler.skipped_steps());
  }
  return 0;
}
