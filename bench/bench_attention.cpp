// bench_attention.cpp: one attention call, forward and forward + backward, on the fused
// scaled_dot_product_attention (backend/cpu/flash_attention.h) and on the unfused route the
// models used before it (matmul, attention_softmax, matmul), at one shape and dtype: the
// per-call cost behind the choice of kernel. Run pinned and on one thread for a stable
// figure, and say how loaded the machine was:
//   OMP_NUM_THREADS=1 taskset -c 0 build/bench/bench_attention [N S D causal dtype reps route block]
// defaults: 64 128 32 1 bf16 20 both 64 (gpt-tiny's attention: batch 16 x 4 heads, 128
// positions; the fused kernel's block as MultiheadAttention passes it); route fused or
// unfused runs only that one (for perf, or to interleave runs).
// Prints the median CPU milliseconds of each (process CPU time: see cpu_ms) and the causal
// FLOP rate (4 N S^2 D / 2 forward,
// 2.5x that for forward + backward as counted by FlashAttention's paper).
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/autograd/autograd.h"
#include "mixprec/ops/ops.h"

using namespace mixprec;

namespace {

// The process's CPU time (all threads), in ms: on a loaded machine a call longer than the
// scheduler's time slice is stretched by the other runnable processes in wall-clock time,
// a shorter one is not, which makes wall-clock comparisons of unequal calls meaningless
// there; CPU time is not stretched (with one thread it is the call's own work).
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double median_ms(const std::function<void()>& f, int reps) {
  f();  // warm-up: caches, oneDNN primitives
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double a = cpu_ms();
    f();
    t.push_back(cpu_ms() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 64, S = argc > 2 ? std::atoll(argv[2]) : 128,
                D = argc > 3 ? std::atoll(argv[3]) : 32;
  const bool causal = argc > 4 ? std::atoi(argv[4]) != 0 : true;
  const std::string dtype = argc > 5 ? argv[5] : "bf16";
  const int reps = argc > 6 ? std::atoi(argv[6]) : 20;
  const std::string routes = argc > 7 ? argv[7] : "both";
  const int64_t block = argc > 8 ? std::atoll(argv[8]) : 64;
  const DType dt = dtype == "f32" ? DType::f32 : DType::bf16;
  if (N < 1 || S < 1 || D < 1 || reps < 1 || block < 1 || (dtype != "f32" && dtype != "bf16") ||
      (routes != "both" && routes != "fused" && routes != "unfused")) {
    std::fprintf(stderr, "usage: bench_attention [N S D causal(0|1) bf16|f32 reps both|fused|unfused block]\n");
    return 2;
  }
  manual_seed(1);
  const Tensor q = Tensor::normal({N, S, D}, 0.0, 1.0).to(dt), k = Tensor::normal({N, S, D}, 0.0, 1.0).to(dt),
               v = Tensor::normal({N, S, D}, 0.0, 1.0).to(dt), g = Tensor::normal({N, S, D}, 0.0, 1.0).to(dt);
  const double scale = 1.0 / std::sqrt(double(D));
  // Each route gets its operands as the model hands them over: the unfused one K^T (the
  // model's is a transposed view of K, free) and Q already scaled (folded into the heads'
  // copy), the fused one K and the scale.
  const Tensor kt = transpose(k, 1, 2), qs = mul(q, scale);
  auto fused = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, causal, scale, block);
  };
  auto unfused = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    return matmul(attention_softmax(matmul(a, b), causal), c);
  };
  const double flops = 4.0 * double(N) * double(S) * double(S) * double(D) * (causal ? 0.5 : 1.0);
  std::printf("# attention N=%lld S=%lld D=%lld %s %s, fused block %lld, %d reps, median CPU ms (GFLOP/s)\n",
              (long long)N, (long long)S, (long long)D, causal ? "causal" : "full", dtype.c_str(), (long long)block, reps);
  for (int route = 0; route < 2; ++route) {
    if (routes != "both" && routes != (route == 0 ? "fused" : "unfused")) continue;
    const auto& f = route == 0 ? std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>(fused)
                               : std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>(unfused);
    const Tensor& a0 = route == 0 ? q : qs;
    const Tensor& b0 = route == 0 ? k : kt;
    const double fwd = median_ms(
        [&] {
          NoGradGuard ng;
          f(a0, b0, v);
        },
        reps);
    const double both = median_ms(
        [&] {
          Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true),
                 c = v.clone().requires_grad_(true);
          f(a, b, c).backward(g);  // d out = g, without a loss op's own cost in the figure
        },
        reps);
    std::printf("%-8s forward %8.3f ms (%6.1f)   forward+backward %8.3f ms (%6.1f)\n", route == 0 ? "fused" : "unfused",
                fwd, flops / fwd * 1e-6, both, 2.5 * flops / both * 1e-6);
  }
  return 0;
}
