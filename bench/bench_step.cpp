// bench_step.cpp: time one full training step (zero_grad, forward, cross_entropy, backward,
// Adam) per model and precision preset, by phase, with GFLOP/s, peak activation memory,
// heap allocations and oneDNN primitive creations per steady-state step.
//
// Presets are interleaved round-robin within one process (one step of each in turn): the
// host is shared and AMX throughput is bimodal, so only side-by-side ratios are meaningful.
// Every result prints a repro command and a machine-readable "RESULT" line that
// bench/report.py turns into the markdown table.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/phased_step.h"
#include "mixprec/amp/amp.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/step_benchmark.h"

namespace {

using namespace mixprec;

struct Options {
  std::vector<std::string> models{"seed-cnn", "cnn", "mlp", "transformer"};
  std::vector<std::string> precisions{"fp32", "amp-bf16", "amp-fp16", "o2-bf16"};
  int repeats = 20;
  int warmup = 3;
  int threads = 2;
  int64_t batch = 0;     // 0: the model's default (256; mlp 512; transformer 32)
  double budget = 0;     // > 0: stop timing a preset after this many seconds (slow presets)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void usage(const char* bad) {
  if (bad) std::fprintf(stderr, "bench_step: %s\n", bad);
  std::fprintf(stderr,
               "usage: bench_step [--model seed-cnn,cnn,mlp,transformer] [--precision fp32,amp-bf16,amp-fp16,o2-bf16]\n"
               "                  [--repeats 20] [--warmup 3] [--threads 2] [--batch 0 (model default)]\n"
               "                  [--budget SECONDS per preset, 0 = none]\n");
  std::exit(bad ? 2 : 0);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage(nullptr);
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    try {
      if (a == "--model") o.models = v == "all" ? o.models : split(v);
      else if (a == "--precision") o.precisions = v == "all" ? o.precisions : split(v);
      else if (a == "--repeats") o.repeats = std::stoi(v);
      else if (a == "--warmup") o.warmup = std::stoi(v);
      else if (a == "--threads") o.threads = std::stoi(v);
      else if (a == "--batch") o.batch = std::stoll(v);
      else if (a == "--budget") o.budget = std::stod(v);
      else usage(("unknown flag " + a).c_str());
    } catch (const std::logic_error&) {
      usage(("bad value '" + v + "' for " + a).c_str());
    }
  }
  if (o.repeats < 1 || o.warmup < 0 || o.threads < 0 || o.batch < 0) usage("flags must be non-negative, repeats >= 1");
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double minimum(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

struct Samples {
  std::vector<double> fwd, bwd, opt, whole;
  int64_t max_allocs = 0, max_prims = 0;  // per timed step (steady state: 0)
  int64_t peak_act = 0, peak_total = 0;   // bytes above the value at step start
  std::vector<double> cast;               // weight casts of one autocast region, ms
  double seconds = 0;
};

void run_model(const Options& o, const std::string& model_name) {
  auto spec = nn::model_spec(model_name);
  if (!spec.is_ok()) {
    std::fprintf(stderr, "bench_step: --model: %s\n", spec.status().message().c_str());
    std::exit(2);
  }
  const int64_t batch = o.batch > 0 ? o.batch : train::default_benchmark_batch(model_name);
  const double gflop = bench::step_flops(model_name, batch) / 1e9;

  std::vector<std::unique_ptr<bench::PhasedStep>> steps;
  for (const std::string& p : o.precisions) {
    auto preset = amp::preset_by_name(p);
    if (!preset.is_ok()) {
      std::fprintf(stderr, "bench_step: --precision: %s\n", preset.status().message().c_str());
      std::exit(2);
    }
    steps.push_back(std::make_unique<bench::PhasedStep>(*spec, *preset, batch));
  }
  const size_t n = steps.size();
  std::vector<Samples> s(n);

  for (int w = 0; w < o.warmup; ++w)
    for (auto& st : steps) st->run();

  for (int r = 0; r < o.repeats; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + size_t(r)) % n;  // rotate the order: no preset always runs first
      if (o.budget > 0 && s[i].seconds > o.budget) continue;
      reset_peak_memory();
      const int64_t act0 = current_bytes(MemoryCategory::activations);
      const int64_t total0 = memory_stats().total_current;
      const int64_t allocs0 = allocation_count();
      const int64_t prims0 = train::primitive_creations();
      const bench::PhaseTimes t = steps[i]->run();
      s[i].max_allocs = std::max(s[i].max_allocs, allocation_count() - allocs0);
      s[i].max_prims = std::max(s[i].max_prims, train::primitive_creations() - prims0);
      s[i].peak_act = std::max(s[i].peak_act, peak_bytes(MemoryCategory::activations) - act0);
      s[i].peak_total = std::max(s[i].peak_total, memory_stats().total_peak - total0);
      s[i].fwd.push_back(t.forward);
      s[i].bwd.push_back(t.backward);
      s[i].opt.push_back(t.optimizer);
      s[i].whole.push_back(t.whole);
      // Sampled next to every step (not once): under load a single sample can be 50x off.
      s[i].cast.push_back(steps[i]->weight_cast_ms());
      s[i].seconds += t.whole / 1000.0;
    }
  }

  std::printf("\n== %s, batch %lld, %d threads, %.3f GFLOP/step, %lld parameters ==\n", model_name.c_str(),
              (long long)batch, omp_get_max_threads(), gflop, (long long)steps[0]->num_parameters());
  std::printf("%-9s %5s %9s %9s %9s %9s %9s %8s %7s %9s %7s %6s %5s\n", "preset", "n", "fwd ms", "bwd ms",
              "opt ms", "step med", "step min", "GFLOP/s", "amp %", "act MiB", "allocs", "prims", "loss");
  std::map<std::string, double> med;
  // AMP machinery inside the step: the fused update does the scaler's inf check, the
  // unscale-on-read and the 16-bit weight writes in the optimizer pass, so it is the
  // optimizer phase's excess over fp32's (the same Adam on f32 weights) in this run; the
  // weight casts of the autocast cache are timed apart. Without fp32 in the run: casts only.
  double fp32_opt = -1;
  for (size_t i = 0; i < n; ++i)
    if (steps[i]->preset().name == "fp32") fp32_opt = median(s[i].opt);
  for (size_t i = 0; i < n; ++i) {
    const Samples& x = s[i];
    const std::string& name = steps[i]->preset().name;
    const double whole = median(x.whole);
    med[name] = whole;
    const double amp_ms = fp32_opt >= 0 ? std::max(0.0, median(x.opt) - fp32_opt) : 0.0;
    const double amp_pct = whole > 0 ? 100.0 * (amp_ms + median(x.cast)) / whole : 0;
    std::printf("%-9s %5zu %9.2f %9.2f %9.2f %9.2f %9.2f %8.1f %7.2f %9.1f %7lld %6lld %5.2f\n", name.c_str(),
                x.whole.size(), median(x.fwd), median(x.bwd), median(x.opt), whole, minimum(x.whole),
                gflop / (whole / 1000.0), amp_pct, double(x.peak_act) / (1 << 20), (long long)x.max_allocs,
                (long long)x.max_prims, steps[i]->last_loss());
    std::printf("  repro: bench_step --model %s --precision %s --repeats %d --warmup %d --threads %d --batch %lld\n",
                model_name.c_str(), name.c_str(), o.repeats, o.warmup, omp_get_max_threads(), (long long)batch);
    std::printf("RESULT impl=mixprec model=%s precision=%s threads=%d batch=%lld n=%zu fwd_ms=%.3f bwd_ms=%.3f "
                "opt_ms=%.3f amp_ms=%.3f cast_ms=%.3f step_ms=%.3f step_min_ms=%.3f gflops=%.2f "
                "peak_act_bytes=%lld peak_total_bytes=%lld allocs_per_step=%lld prims_per_step=%lld loss=%.5f\n",
                model_name.c_str(), name.c_str(), omp_get_max_threads(), (long long)batch, x.whole.size(),
                median(x.fwd), median(x.bwd), median(x.opt), amp_ms, median(x.cast), whole, minimum(x.whole),
                gflop / (whole / 1000.0), (long long)x.peak_act, (long long)x.peak_total, (long long)x.max_allocs,
                (long long)x.max_prims, steps[i]->last_loss());
  }
  if (med.count("fp32")) {
    std::printf("  speed-up vs our fp32 (interleaved medians):");
    for (size_t i = 0; i < n; ++i) {
      const std::string& name = steps[i]->preset().name;
      if (name != "fp32" && med[name] > 0) std::printf("  %s %.2fx", name.c_str(), med["fp32"] / med[name]);
    }
    std::printf("\n");
    for (size_t i = 0; i < n; ++i) {
      const std::string& name = steps[i]->preset().name;
      size_t f = 0;
      while (steps[f]->preset().name != "fp32") ++f;
      if (name != "fp32" && s[f].peak_act > 0)
        std::printf("  peak activations %s / fp32: %.1f%%\n", name.c_str(), 100.0 * double(s[i].peak_act) / double(s[f].peak_act));
    }
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  std::printf("bench_step: threads %d, repeats %d after %d warm-ups, presets interleaved round-robin\n",
              omp_get_max_threads(), o.repeats, o.warmup);
  std::printf("phases: fwd = input cast + forward + loss; bwd = backward; opt = zero_grad + scaler check + "
              "(fused) Adam + 16-bit weight copies;\n  amp %% = (opt - fp32's opt: the scaler and 16-bit weight "
              "writes inside the fused update, + the weight casts the forward made) / step\n");
  for (const std::string& m : o.models) run_model(o, m);
  return 0;
}
