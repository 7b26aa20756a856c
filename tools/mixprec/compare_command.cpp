// compare_command.cpp: `mixprec compare`: the classic experiment. The same model, data and
// seed trained under several presets (default: fp32, pure-fp16, amp-fp16, amp-bf16), then
// one table of time per step, speed-up, activation memory, final loss, accuracy and
// skipped steps. The trainings run one after another, so a load that changes between them
// would skew their times (an emulated amp-fp16 once came out 2.6x faster than fp32): the
// step times in the table are measured again afterwards with the presets interleaved step by
// step (train::benchmark_steps, as `mixprec bench`), with each preset's spread as the noise.
#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/core/hardware.h"
#include "mixprec/amp/precision.h"
#include "mixprec/io/run_dir.h"
#include "mixprec/train/step_benchmark.h"
#include "mixprec/train/train.h"
#include "progress.h"

namespace mixprec::cli {

namespace {

// Step times of every preset, interleaved (one step of each in turn) on a synthetic batch of
// the model's shape: what the table's speed-ups are made of. Empty when the model cannot be
// benchmarked (its shape comes from the data); the sequential times are shown then.
std::vector<train::PresetTiming> interleaved_timings(const train::TrainConfig& config,
                                                     const std::vector<std::string>& presets) {
  train::StepBenchmarkOptions o;
  o.model = config.model;
  o.presets = presets;
  o.batch_size = config.batch_size;
  o.threads = config.threads;
  o.seed = config.seed;
  o.steps = 12;
  o.warmup = 2;
  if (config.input_channels > 0) o.input = {config.input_channels, config.input_height, config.input_width};
  if (config.num_classes > 0) o.classes = config.num_classes;
  auto r = train::benchmark_steps(o);
  if (!r.is_ok()) return {};
  return r->presets;
}

// Half the spread between the 10th and 90th percentile step, as a share of the median.
double noise_share(std::vector<double> ms) {
  if (ms.size() < 3) return 0.0;
  std::sort(ms.begin(), ms.end());
  const double lo = ms[ms.size() / 10], hi = ms[ms.size() - 1 - ms.size() / 10], mid = ms[ms.size() / 2];
  return mid > 0 ? 0.5 * (hi - lo) / mid : 0.0;
}

}  // namespace

Runner add_compare_command(CLI::App& app) {
  auto config = std::make_shared<train::TrainConfig>();
  auto presets = std::make_shared<std::string>("fp32,pure-fp16,amp-fp16,amp-bf16");
  CLI::App* cmd = app.add_subcommand(
      "compare", "Train the same model under several precision presets and compare them side by side");
  add_training_flags(cmd, *config);
  // compare sets the precision of each run itself and starts every run fresh: the flags
  // that would choose a precision or continue a run do nothing here, so --help must not offer them.
  for (const char* ignored : {"--precision", "--no-amp", "--resume"}) cmd->remove_option(cmd->get_option(ignored));
  cmd->add_option("--presets", *presets, "Comma-separated presets to run, the first is the baseline")
      ->capture_default_str();
  return [config, presets]() -> int {
    std::vector<std::string> names = split_commas(*presets);
    if (names.empty()) {
      std::fprintf(stderr, "mixprec: usage error: --presets: give at least one preset\n");
      return kExitUsage;
    }
    for (const auto& n : names)
      if (auto p = amp::preset_by_name(n); !p.is_ok()) {
        std::fprintf(stderr, "mixprec: usage error: --presets: %s\n", p.status().message().c_str());
        return kExitUsage;
      }
    // One run directory per preset under runs/compareN (or --run-dir), plotted together.
    std::string base_dir;
    if (config->run_dir != "none") {
      auto rd = config->run_dir.empty() ? create_run_dir("runs", "", "", "compare") : open_run_dir(config->run_dir);
      if (!rd.is_ok()) {
        std::fprintf(stderr, "mixprec: error: %s\n", rd.status().message().c_str());
        return exit_code_for(rd.status());
      }
      base_dir = rd->path;
    }
    std::vector<train::TrainResult> results;
    std::vector<std::string> run_dirs;
    for (const auto& n : names) {
      train::TrainConfig c = *config;
      c.precision = n;
      c.run_dir = base_dir.empty() ? "" : base_dir + "/" + n;
      if (!c.run_dir.empty()) run_dirs.push_back(c.run_dir);
      c.stop_on_divergence = false;  // a diverging preset is a result, not an error
      std::printf("== %s\n", n.c_str());
      std::fflush(stdout);
      Progress progress(stdout);
      train::Callbacks cb;
      cb.on_step = [&](const train::StepReport& r) { progress.step(r); };
      cb.on_eval = [&](const train::EvalReport& r) { progress.eval(r, c.epochs); };
      auto r = train::run(c, cb);
      progress.finish();
      if (!r.is_ok()) {
        std::fprintf(stderr, "mixprec: error: %s: %s\n", n.c_str(), r.status().message().c_str());
        return exit_code_for(r.status());
      }
      results.push_back(std::move(r).value());
    }
    const train::TrainResult& base = results.front();
    std::printf("\nstep times: %d steps of each preset, interleaved step by step ...\n", 12);
    std::fflush(stdout);
    const std::vector<train::PresetTiming> timed = interleaved_timings(*config, names);
    std::vector<double> ms(names.size()), noise(names.size(), 0.0);
    for (size_t i = 0; i < names.size(); ++i) {
      ms[i] = timed.size() == names.size() ? timed[i].median_ms : 1e3 * results[i].seconds_per_step;
      if (timed.size() == names.size()) noise[i] = noise_share(timed[i].step_ms);
    }
    std::printf("\n%-10s %12s %8s %9s %14s %11s %10s %8s  %s\n", "precision", "ms/step", "noise", "speed-up",
                "act. memory", "final loss", "accuracy", "skipped", "note");
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      const double mem_pct = base.peak_activation_bytes > 0
                                 ? 100.0 * double(r.peak_activation_bytes) / double(base.peak_activation_bytes)
                                 : 0.0;
      std::string note;
      if (r.diverged) note = "diverged at step " + std::to_string(r.diverged_at_step);
      const double final_loss = r.losses.empty() ? 0.0 : r.losses.back();
      char acc[32], spread[16];
      if (r.evals.empty()) std::snprintf(acc, sizeof acc, "-");
      else std::snprintf(acc, sizeof acc, "%.2f%%", 100.0 * r.final_accuracy);
      if (timed.empty()) std::snprintf(spread, sizeof spread, "-");
      else std::snprintf(spread, sizeof spread, "+-%.0f%%", 100.0 * noise[i]);
      std::printf("%-10s %12.1f %8s %8.2fx %13.0f%% %11.4f %10s %8lld  %s\n", names[i].c_str(), ms[i], spread,
                  ms[0] / std::max(ms[i], 1e-12), mem_pct, final_loss, acc, (long long)r.skipped_steps, note.c_str());
    }
    if (timed.empty())
      std::printf("\nms/step: median step time of each training, run one after another (this model's shape comes "
                  "from its data, so it could not be re-timed interleaved): a load that changed between the runs "
                  "skews these ratios.\n");
    else
      std::printf("\nms/step: median of %d steps per preset timed interleaved (one step of each in turn, a synthetic "
                  "batch of %lld), so a changing load affects every preset alike; noise: half the 10-90%% spread "
                  "of those steps. CPU: %s\n",
                  12, (long long)config->batch_size, cpu_feature_list().c_str());
    std::printf("act. memory: peak activation bytes (tracked allocator) as a %% of %s; final loss, accuracy and "
                "skipped steps: the trainings.\n",
                names[0].c_str());
    if (!base_dir.empty()) {
      std::printf("run directories: %s/<preset>\n", base_dir.c_str());
      plot_runs(run_dirs, base_dir + "/compare");
    }
    return kExitOk;
  };
}

}  // namespace mixprec::cli
