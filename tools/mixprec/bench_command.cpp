// bench_command.cpp: `mixprec bench`: time of a full training step for a model under one
// or more presets, interleaved in one process, as a table or as JSON (--json) for scripts.
// The whole suite beside PyTorch is bench/run_benchmarks.sh; this is the quick, installed
// version of its core measurement.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixprec/core/hardware.h"
#include "exit_codes.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/step_benchmark.h"
#include "progress.h"
#include "omp_wait.h"

namespace mixprec::cli {

namespace {

struct BenchFlags {
  train::StepBenchmarkOptions options;
  std::string presets = "fp32,amp-bf16", input;
  bool json = false;
};

nlohmann::json to_json(const train::StepBenchmarkResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["batch_size"] = r.batch_size;
  j["threads"] = r.threads;
  j["workers"] = r.workers;
  j["workers_note"] = r.workers_note;
  j["thread_policy"] = r.thread_policy;
  j["omp_wait"] = omp_wait_description();
  j["parameters"] = r.parameters;
  j["tokens_per_sample"] = r.tokens_per_sample;
  j["cpu_features"] = cpu_feature_list();
  const double base = r.presets.front().median_ms;
  for (const train::PresetTiming& t : r.presets) {
    j["presets"].push_back({{"preset", t.preset},
                            {"median_ms", t.median_ms},
                            {"min_ms", t.min_ms},
                            {"images_per_second", t.images_per_second},
                            {"tokens_per_second", t.images_per_second * double(r.tokens_per_sample)},
                            {"forward_ms", t.forward_ms},
                            {"backward_ms", t.backward_ms},
                            {"update_ms", t.update_ms},
                            {"speedup_vs_first", t.median_ms > 0 ? base / t.median_ms : 0.0},
                            {"peak_activation_bytes", t.peak_activation_bytes},
                            {"heap_allocations", t.heap_allocations},
                            {"primitive_creations", t.primitive_creations},
                            {"last_loss", t.last_loss},
                            {"step_ms", t.step_ms},
                            {"step_threads", t.step_threads}});
  }
  return j;
}

void print_table(const train::StepBenchmarkResult& r, int64_t steps) {
  const std::string workers =
      r.workers > 1 ? std::to_string(r.workers) + " workers (in-process data-parallel ranks) x " : std::string();
  std::printf("\n%s, batch %lld, %s%d threads, %lld parameters, %lld timed steps per preset (interleaved)\n"
              "threads: %s%s\n",
              r.model.c_str(), (long long)r.batch_size, workers.c_str(), r.threads, (long long)r.parameters,
              (long long)steps, r.thread_policy.c_str(), r.workers > 1 ? " per worker" : "");
  if (!r.workers_note.empty()) std::printf("workers: %s\n", r.workers_note.c_str());
  std::printf("OpenMP waits: %s\n", omp_wait_description().c_str());
  // Text models are compared by tokens a second (a language model's sample: its context).
  const bool text = r.tokens_per_sample > 0;
  std::printf("%-10s | %9s | %9s | %20s | %9s | %8s | %12s | %8s | %6s | %6s | %7s\n", "preset", "median ms",
              "min ms", "fwd / bwd / upd ms", text ? "tokens/s" : "images/s", "speed-up", "act. memory", "% first",
              "allocs", "prims", "loss");
  const train::PresetTiming& first = r.presets.front();
  for (const train::PresetTiming& t : r.presets) {
    const double speedup = t.median_ms > 0 ? first.median_ms / t.median_ms : 0.0;
    const double mem_share = first.peak_activation_bytes > 0
                                 ? 100.0 * double(t.peak_activation_bytes) / double(first.peak_activation_bytes)
                                 : 0.0;
    char phases[64];
    std::snprintf(phases, sizeof phases, "%.1f / %.1f / %.1f", t.forward_ms, t.backward_ms, t.update_ms);
    std::printf("%-10s | %9.2f | %9.2f | %20s | %9.0f | %7.2fx | %12s | %7.0f%% | %6lld | %6lld | %7.4f\n",
                t.preset.c_str(), t.median_ms, t.min_ms, phases,
                text ? t.images_per_second * double(r.tokens_per_sample) : t.images_per_second, speedup,
                format_bytes(t.peak_activation_bytes).c_str(), mem_share, (long long)t.heap_allocations,
                (long long)t.primitive_creations, t.last_loss);
  }
  std::printf("speed-up and memory are relative to the first preset; allocs/prims: heap allocations and oneDNN\n"
              "primitive creations over all timed steps (0 means a clean steady state). CPU: %s\n",
              cpu_feature_list().c_str());
}

int usage_error(const std::string& flag, const std::string& message) {
  std::fprintf(stderr, "mixprec: usage error: %s: %s\n", flag.c_str(), message.c_str());
  return kExitUsage;
}

int run_bench(BenchFlags& f) {
  f.options.presets = split_commas(f.presets);
  if (f.options.presets.empty()) return usage_error("--precision", "give at least one preset, e.g. fp32,amp-bf16");
  if (!f.input.empty()) {  // CxHxW, or T for a text classifier
    long long a = 0, b = 0, d = 0;
    char tail = 0;
    if (std::sscanf(f.input.c_str(), "%lldx%lldx%lld%c", &a, &b, &d, &tail) == 3) f.options.input = {a, b, d};
    else if (std::sscanf(f.input.c_str(), "%lld%c", &a, &tail) == 1) f.options.input = {a};
    else return usage_error("--input", "expected CxHxW (e.g. 3x32x32) or, for a text classifier, T; got '" + f.input + "'");
  }
  if (auto spec = train::benchmark_spec(f.options); !spec.is_ok()) {
    const std::string& m = spec.status().message();
    return m.rfind("--", 0) == 0 ? usage_error(m.substr(0, m.find(':')), m.substr(m.find(':') + 2))
                                 : usage_error("--model", m);
  }
  for (const std::string& p : f.options.presets)
    if (auto preset = amp::preset_by_name(p); !preset.is_ok())
      return usage_error("--precision", preset.status().message());
  // A self-updating count on a terminal; nothing in logs, where the table says it all.
  const bool progress = is_terminal(stderr);
  auto result = train::benchmark_steps(f.options, [&](int64_t done, int64_t total) {
    if (progress) std::fprintf(stderr, "\rbench: %lld/%lld steps", (long long)done, (long long)total);
  });
  if (progress) std::fprintf(stderr, "\r%30s\r", "");
  if (!result.is_ok()) {
    std::fprintf(stderr, "mixprec: %s: %s\n",
                 result.status().code() == StatusCode::invalid_argument ? "usage error" : "error",
                 result.status().message().c_str());
    return exit_code_for(result.status());
  }
  if (!result->thread_warning.empty()) std::fprintf(stderr, "mixprec: warning: %s\n", result->thread_warning.c_str());
  if (f.json)
    std::printf("%s\n", to_json(*result).dump(2).c_str());
  else
    print_table(*result, f.options.steps);
  return kExitOk;
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time a full training step (forward, loss, backward, optimizer) of a model under precision presets");
  cmd->add_option("--model", f->options.model,
                  "Model: seed-cnn, cnn, mlp, transformer, resnet20, resnet20-cifar, gpt-tiny, gpt, or a model file "
                  "FILE.yaml")
      ->capture_default_str();
  cmd->add_option("--input", f->input,
                  "A model file's input: CxHxW (default 1x28x28), or T bytes for a text classifier (default 128)");
  cmd->add_option("--classes", f->options.classes, "A model file's classes")->capture_default_str();
  cmd->add_option("--precision", f->presets, "Comma-separated presets, interleaved; the first is the baseline")
      ->capture_default_str();
  cmd->add_option("--batch-size", f->options.batch_size,
                  "Batch size (0: the model's default, 256; mlp 512; transformer 32)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--steps", f->options.steps, "Timed steps per preset")
      ->check(at_least(1))->capture_default_str();
  cmd->add_option("--warmup", f->options.warmup, "Untimed steps per preset first")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--threads", f->options.threads,
                  "Threads (0: OMP_NUM_THREADS if set, else adaptive: the cores other processes leave free, within the "
                  "cgroup CPU quota)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--workers", f->options.workers,
                  "Run the step as N workers, threads that are the ranks of an in-process data-parallel step (each on "
                  "batch / N samples with --threads threads, 1 by default; the arithmetic of mpirun -np N): meeting a "
                  "few times per step, they keep their share of cores that other processes keep busy (0: one per core "
                  "when other processes keep cores busy at the start and neither --threads nor OMP_NUM_THREADS is "
                  "set, else 1)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--seed", f->options.seed, "Seed of the weights and the synthetic batch")->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the results as JSON (every step's time included) instead of a table");
  return [f]() { return run_bench(*f); };
}

}  // namespace mixprec::cli
