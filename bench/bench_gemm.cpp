// bench_gemm.cpp: the best oneDNN matmul rate on this machine, measured in the same run as
// the training steps, so that large-matrix steps (the MLP) can be stated as a share of it.
// This file talks to oneDNN directly (bench/ is not the library): plain row-major source
// and destination, weights in the layout oneDNN prefers (packed once, outside the timing),
// as a training framework that caches packed weights would see it.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include <dnnl.hpp>

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Shape {
  int64_t m, n, k;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Fills a plain buffer with small values (bf16 keeps them exact enough; the rate does not
// depend on them, but denormals or NaN could).
void fill(dnnl::memory& mem, dnnl::engine& eng, dnnl::stream& s, int64_t count, dt type) {
  std::vector<float> host(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) host[size_t(i)] = float((i * 7919) % 17 - 8) / 16.0f;
  dnnl::memory f32_mem({{count}, dt::f32, tag::a}, eng, host.data());
  dnnl::memory dst({{count}, type, tag::a}, eng, mem.get_data_handle());
  dnnl::reorder(f32_mem, dst).execute(s, f32_mem, dst);
  s.wait();
}

struct Result {
  double med_gflops, best_gflops, med_ms;
  std::string impl;
};

Result run(dnnl::engine& eng, dnnl::stream& s, const Shape& sh, dt type, int warmup, int repeats) {
  const dnnl::memory::desc a_md({sh.m, sh.k}, type, tag::ab);
  const dnnl::memory::desc b_any({sh.k, sh.n}, type, tag::any);
  const dnnl::memory::desc b_plain({sh.k, sh.n}, type, tag::ab);
  const dnnl::memory::desc c_md({sh.m, sh.n}, type, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  dnnl::memory a(a_md, eng), b_src(b_plain, eng), b(pd.weights_desc(), eng), c(c_md, eng);
  fill(a, eng, s, sh.m * sh.k, type);
  fill(b_src, eng, s, sh.k * sh.n, type);
  dnnl::reorder(b_src, b).execute(s, b_src, b);
  s.wait();
  dnnl::matmul mm(pd);
  const std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  for (int i = 0; i < warmup; ++i) mm.execute(s, args);
  s.wait();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    mm.execute(s, args);
    s.wait();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double flop = 2.0 * double(sh.m) * double(sh.n) * double(sh.k);
  const double med = median(ms);
  const double best = *std::min_element(ms.begin(), ms.end());
  return {flop / (med * 1e6), flop / (best * 1e6), med, pd.impl_info_str()};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 15, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--repeats") repeats = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--warmup") warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_gemm [--threads 2] [--repeats 15] [--warmup 3]\n");
      return 2;
    }
  }
  if (threads > 0) omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const std::vector<Shape> shapes{{256, 4096, 4096}, {512, 4096, 4096}, {1024, 1024, 1024}, {2048, 2048, 2048}};
  std::printf("bench_gemm: oneDNN %d.%d.%d matmul, %d threads, median/best of %d after %d warm-ups\n",
              dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, omp_get_max_threads(),
              repeats, warmup);
  double best_bf16 = 0, best_f32 = 0;
  // Interleave dtypes shape by shape: the AMX rate drifts between fast and slow modes.
  for (const Shape& sh : shapes) {
    for (dt type : {dt::bf16, dt::f32}) {
      const char* name = type == dt::bf16 ? "bf16" : "f32";
      Result r;
      try {
        r = run(eng, s, sh, type, warmup, repeats);
      } catch (const dnnl::error& e) {
        // oneDNN 2.6 has no bf16 matmul without AVX512 (e.g. AVX2-only Zen3): report the
        // dtype as missing (rate 0) instead of aborting the whole suite.
        std::printf("  %5lldx%5lldx%5lld %-4s  no oneDNN implementation on this CPU (%s)\n", (long long)sh.m,
                    (long long)sh.n, (long long)sh.k, name, e.what());
        continue;
      }
      (type == dt::bf16 ? best_bf16 : best_f32) = std::max(type == dt::bf16 ? best_bf16 : best_f32, r.med_gflops);
      std::printf("  %5lldx%5lldx%5lld %-4s  %8.3f ms  median %7.1f GFLOP/s  best %7.1f  [%s]\n",
                  (long long)sh.m, (long long)sh.n, (long long)sh.k, name, r.med_ms, r.med_gflops,
                  r.best_gflops, r.impl.c_str());
      std::printf("RESULT impl=onednn-gemm shape=%lldx%lldx%lld dtype=%s threads=%d gflops=%.2f best_gflops=%.2f\n",
                  (long long)sh.m, (long long)sh.n, (long long)sh.k, name, omp_get_max_threads(), r.med_gflops,
                  r.best_gflops);
    }
  }
  std::printf("best median: bf16 %.1f GFLOP/s, f32 %.1f GFLOP/s (0: no implementation)\n", best_bf16, best_f32);
  std::printf("RESULT impl=onednn-gemm-best threads=%d bf16_gflops=%.2f f32_gflops=%.2f\n", omp_get_max_threads(),
              best_bf16, best_f32);
  std::printf("  repro: bench_gemm --threads %d --repeats %d --warmup %d\n", omp_get_max_threads(), repeats, warmup);
  return 0;
}
