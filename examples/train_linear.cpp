// train_linear.cpp: the smallest training loop. Fits Linear(10, 2) to a fixed random
// linear map with MSE and SGD, printing the loss as it falls.
#include <cstdio>

#include "mixprec/mixprec.h"

using namespace mixprec;

int main() {
  manual_seed(0);
  // Data: y = x @ A^T + b for a random A [2, 10], b [2], 64 samples.
  const Tensor x = Tensor::normal({64, 10}, 0.0, 1.0);
  const Tensor true_weight = Tensor::normal({2, 10}, 0.0, 1.0);
  const Tensor true_bias = Tensor::normal({2}, 0.0, 1.0);
  const Tensor y = linear(x, true_weight, true_bias);

  nn::Linear model(10, 2);
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  double loss_value = 0;
  for (int step = 1; step <= 100; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss(model(x), y);
    loss.backward();
    opt.step();
    loss_value = loss.item();
    if (step % 20 == 0) std::printf("step %3d  loss %.6f\n", step, loss_value);
  }
  return loss_value < 1e-3 ? 0 : 1;  // the fit is exact: the loss must reach ~0
}
