// conv3x3_weight_grad_probe.cpp: times a bf16 3x3 convolution's weight gradient on oneDNN's
// kernel and on ours (backend/cpu/conv3x3_weight_grad.h) for the CNNs' shapes, the measurement
// behind conv3x3_weight_grad_applies(). Not a test (never registered with ctest: a timing); it
// lives under tests/ because it calls the backend's internal headers, which bench/ may not
// include. Needs a CPU with AVX512-BF16 (else ours does not apply and it says so).
//   build/tests/conv3x3_weight_grad_probe [threads...]   (default: 1 2)
// For each thread count and shape the two run interleaved, 12 rounds (2 discarded); prints
// the median wall-clock time of each and its GFLOP/s. Run it on a quiet machine.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/conv3x3_weight_grad.h"
#include "backend/kernels.h"
#include "unit/backend/onednn_test_util.h"

using namespace mixprec;

namespace {

struct Shape3x3 {
  int64_t n, c, o, hw;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts;
  for (int i = 1; i < argc; ++i) thread_counts.push_back(std::atoi(argv[i]));
  if (thread_counts.empty()) thread_counts = {1, 2};
  // seed-cnn's conv2; resnet20's three stages; cnn's conv2 (MNIST, 14x14); a larger image.
  const std::vector<Shape3x3> shapes = {{256, 32, 64, 16}, {256, 16, 16, 32}, {256, 32, 32, 16},
                                        {256, 64, 64, 8},  {128, 32, 64, 14}, {128, 64, 64, 32}};
  backend::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  for (int threads : thread_counts) {
    omp_set_num_threads(threads);
    for (const Shape3x3& s : shapes) {
      const Tensor x = test::random_input({s.n, s.c, s.hw, s.hw}, DType::bf16, 1, MemoryFormat::channels_last);
      const Tensor dy = test::random_input({s.n, s.o, s.hw, s.hw}, DType::bf16, 2, MemoryFormat::channels_last);
      const mixprec::Shape ws{s.o, s.c, 3, 3};
      const bool ours = backend::cpu::conv3x3_weight_grad_applies(x, dy, ws, p);
      std::vector<double> theirs_ms, ours_ms;
      for (int round = 0; round < 12; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        backend::onednn::conv2d_backward_weights(x, dy, ws, true, p);
        const auto t1 = std::chrono::steady_clock::now();
        if (ours) backend::cpu::conv3x3_weight_grad(x, dy, ws, true);
        const auto t2 = std::chrono::steady_clock::now();
        if (round < 2) continue;
        theirs_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        ours_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      const double flop = 2.0 * double(s.n * s.hw * s.hw * s.o * s.c * 9);
      const double a = median(theirs_ms), b = median(ours_ms);
      std::printf("threads %d  N%ld %ld->%ld %ldx%ld: oneDNN %.2f ms (%.0f GFLOP/s)", threads, long(s.n), long(s.c),
                  long(s.o), long(s.hw), long(s.hw), a, flop / a / 1e6);
      if (ours) std::printf(", ours %.2f ms (%.0f GFLOP/s)\n", b, flop / b / 1e6);
      else std::printf(", ours not taken (oneDNN runs it)\n");
    }
  }
}
