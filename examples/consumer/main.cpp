// main.cpp: builds against the installed mixprec and runs one training step of a tiny
// linear model, printing the loss before and after.
#include <cstdio>

#include <mixprec/mixprec.h>

int main() {
  using namespace mixprec;
  manual_seed(1);
  nn::Linear model(4, 1);
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  const Tensor x = Tensor::ones({8, 4});
  const Tensor y = Tensor::zeros({8, 1});
  const double before = mse_loss(model(x), y).item();
  Tensor loss = mse_loss(model(x), y);
  loss.backward();
  opt.step();
  const double after = mse_loss(model(x), y).item();
  std::printf("consumer: loss %.6f -> %.6f\n", before, after);
  return after < before ? 0 : 1;
}
