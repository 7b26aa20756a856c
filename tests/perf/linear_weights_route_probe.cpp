// linear_weights_route_probe.cpp: times linear_backward_weights' two routes
// (backend/onednn/linear_weights_route.h) on the models' shapes, the measurement behind
// weights_route(). Not a test (never registered with ctest: a timing); it lives under tests/
// because it calls the backend's internal headers, which bench/ may not include.
//   build/tests/linear_weights_route_probe [reps_scale] [threads...]   (default: 1 1 2)
// For each thread count, dtype (bf16, f32) and shape, runs the routes interleaved (the order
// alternating by round) and prints the median process CPU time of each (see cpu_ms), the
// parts (column sums alone, transpose + sums alone) and the product's rate. CPU time, not
// wall-clock time: on a loaded machine a call longer than the scheduler's slice is stretched
// in wall-clock time by the other runnable processes; its CPU time is not (with 2 threads it
// does include the OpenMP threads' spin-waits).
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/column_sum.h"
#include "backend/onednn/linear_weights_route.h"
#include "unit/backend/onednn_test_util.h"

using namespace mixprec;
using backend::onednn::WeightsRoute;

namespace {

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double time_once(const std::function<void()>& f) {
  const double a = cpu_ms();
  f();
  return cpu_ms() - a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Shape3 {
  const char* name;
  int64_t N, K, O;
};

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::vector<int> threads;
  for (int i = 2; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  const std::vector<Shape3> shapes = {
      {"gpt-tiny qkv", 2048, 128, 384},   {"gpt-tiny proj", 2048, 128, 128},
      {"gpt-tiny c_fc", 2048, 128, 512},  {"gpt-tiny c_proj", 2048, 512, 128},
      {"encoder qkv", 4096, 256, 768},    {"encoder proj", 4096, 256, 256},
      {"encoder fc1", 4096, 256, 1024},   {"encoder fc2", 4096, 1024, 256},
      {"mlp hidden", 512, 4096, 4096},
  };
  std::printf("| threads | dtype | layer | N | K | O | strided ms | transposed ms | new/old | column sums ms | "
              "transpose+sums ms | strided GFLOP/s | transposed GFLOP/s | chosen | max abs diff_weights diff | bias bits equal |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int t : threads) {
    omp_set_num_threads(t);
    for (DType dt : {DType::bf16, DType::f32}) {
      for (const Shape3& s : shapes) {
        const Tensor src = test::random_input({s.N, s.K}, dt, 1);
        const Tensor dd = test::random_input({s.N, s.O}, dt, 2);
        auto old_route = [&] { backend::onednn::linear_backward_weights_on(WeightsRoute::strided, src, dd, true); };
        auto new_route = [&] { backend::onednn::linear_backward_weights_on(WeightsRoute::transposed, src, dd, true); };
        auto sums = [&] { backend::cpu::column_sums_f32(dd); };
        auto transpose = [&] { backend::cpu::transpose_with_column_sums(dd, true); };
        // Warm-up (primitives, allocator, caches), and how far apart the routes' products are.
        const auto ws = backend::onednn::linear_backward_weights_on(WeightsRoute::strided, src, dd, true);
        const auto wt = backend::onednn::linear_backward_weights_on(WeightsRoute::transposed, src, dd, true);
        const std::vector<double> va = ws.diff_weights.to_vector_f64(), vb = wt.diff_weights.to_vector_f64();
        double diff = 0;
        for (size_t i = 0; i < va.size(); ++i) diff = std::max(diff, std::fabs(va[i] - vb[i]));
        const bool bias_same = ws.diff_bias.to_vector_f64() == wt.diff_bias.to_vector_f64();
        const double est = std::max(0.01, time_once(old_route));
        const int reps = std::clamp(int(scale * 400.0 / est), 5, 201) | 1;
        std::vector<double> a, b, c, d;
        for (int r = 0; r < reps; ++r) {
          if (r % 2) {
            a.push_back(time_once(old_route));
            b.push_back(time_once(new_route));
          } else {
            b.push_back(time_once(new_route));
            a.push_back(time_once(old_route));
          }
          c.push_back(time_once(sums));
          d.push_back(time_once(transpose));
        }
        const double ma = median(a), mb = median(b);
        const double gflop = 2.0 * double(s.N) * double(s.K) * double(s.O) * 1e-9;
        std::printf("| %d | %s | %s | %lld | %lld | %lld | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %s | %g | %s |\n", t,
                    dtype_name(dt), s.name, (long long)s.N, (long long)s.K, (long long)s.O, ma, mb, mb / ma,
                    median(c), median(d), gflop / ma * 1e3, gflop / mb * 1e3,
                    backend::onednn::weights_route(s.N, s.K, s.O, dt) == WeightsRoute::transposed ? "transposed"
                                                                                                  : "strided",
                    diff, bias_same ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
