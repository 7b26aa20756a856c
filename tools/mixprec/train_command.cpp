// train_command.cpp: `mixprec train`: flags, the resolved-configuration table, progress
// and the end-of-run summary.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/cpu_features.h"
#include "exit_codes.h"
#include "mixprec/precision.h"
#include "mixprec/run_dir.h"
#include "mixprec/train.h"
#include "progress.h"
#include "train/config_json.h"

namespace mixprec::cli {

namespace {

void print_config(const train::TrainConfig& c,
                  const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::pair<std::string, std::string>> rows = {
      {"precision", c.precision},
      {"optimizer", c.optimizer + " (lr " + std::to_string(c.lr) + ", weight decay " +
                        std::to_string(c.weight_decay) + ")"},
      {"epochs", std::to_string(c.epochs)},
      {"max steps", c.max_steps < 0 ? "none" : std::to_string(c.max_steps)},
      {"batch size", std::to_string(c.batch_size)},
      {"seed", std::to_string(c.seed)},
      {"cpu features", cpu_features_string()},
  };
  rows.insert(rows.begin(), extra.begin(), extra.end());
  std::printf("| %-14s | %-58s |\n", "Parameter", "Value");
  std::printf("|%s|%s|\n", std::string(16, '-').c_str(), std::string(60, '-').c_str());
  for (auto& [k, v] : rows) std::printf("| %-14s | %-58s |\n", k.c_str(), v.c_str());
  std::fflush(stdout);
}

// config.json of the run being resumed: RUN_DIR/config.json, or the one beside a checkpoint.
std::string saved_config_path(const std::string& resume) {
  std::error_code ec;
  if (std::filesystem::is_directory(resume, ec)) return resume + "/config.json";
  const auto slash = resume.find_last_of('/');
  return (slash == std::string::npos ? std::string(".") : resume.substr(0, slash)) + "/config.json";
}

// --resume continues with the run's own settings (as Ultralytics' resume does); a flag given
// on this command line wins over the saved value.
Status adopt_resumed_config(CLI::App* cmd, train::TrainConfig& config) {
  const std::string path = saved_config_path(config.resume);
  std::ifstream in(path);
  if (!in) return Status::ok();  // no config.json: the flags as given (restore checks the rest)
  std::stringstream text;
  text << in.rdbuf();
  auto given = [cmd](const std::string& key) {
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (key == "shuffle") flag = "--no-shuffle";
    if (key == "loss_spike_factor") flag = "--loss-spike";
    if (key == "precision" && cmd->get_option("--no-amp")->count() > 0) return true;
    const CLI::Option* o = cmd->get_option_no_throw(flag);
    return o != nullptr && o->count() > 0;
  };
  auto merged = train::adopt_saved_config(config, text.str(), given);
  if (!merged.is_ok()) return Status(StatusCode::bad_checkpoint, path + ": " + merged.status().message());
  config = *merged;
  std::printf("resuming with the configuration in %s (flags on the command line win)\n", path.c_str());
  return Status::ok();
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto config = std::make_shared<train::TrainConfig>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: the CNN on Fashion-MNIST)");
  add_training_flags(cmd, *config);

  return [config, cmd]() -> int {
    if (!config->resume.empty()) {
      if (Status st = adopt_resumed_config(cmd, *config); !st.is_ok()) {
        std::fprintf(stderr, "mixprec: error: %s\n", st.message().c_str());
        return exit_code_for(st);
      }
    }
    if (Status st = train::validate(*config); !st.is_ok()) {
      std::fprintf(stderr, "mixprec: usage error: %s\n", st.message().c_str());
      return kExitUsage;
    }
    // The run directory: auto-named unless given; --run-dir none writes nothing.
    if (config->run_dir == "none") {
      config->run_dir.clear();
    } else if (config->run_dir.empty() && config->resume.empty()) {
      auto rd = create_run_dir("runs");
      if (!rd.is_ok()) {
        std::fprintf(stderr, "mixprec: error: %s\n", rd.status().message().c_str());
        return exit_code_for(rd.status());
      }
      config->run_dir = rd->path;
    }
    Progress progress(stdout);
    train::Callbacks cb;
    cb.on_start = print_config;
    cb.on_warning = [](const std::string& w) { std::fprintf(stderr, "mixprec: warning: %s\n", w.c_str()); };
    cb.on_step = [&](const train::StepReport& r) { progress.step(r); };
    cb.on_eval = [&](const train::EvalReport& r) { progress.eval(r, config->epochs); };
    auto result = train::run(*config, cb);
    progress.finish();
    if (!result.is_ok()) {
      std::fprintf(stderr, "mixprec: error: %s\n", result.status().message().c_str());
      return exit_code_for(result.status());
    }
    const train::TrainResult& r = result.value();
    const std::string run_dir = !config->run_dir.empty() ? config->run_dir
                                : !r.last_checkpoint.empty() ? r.last_checkpoint.substr(0, r.last_checkpoint.find_last_of('/'))
                                                             : "";
    std::printf("\nsummary: %lld steps in %s (%.1f ms/step median) | final loss %.4f | "
                "best test accuracy %.2f%% | peak memory %s (activations %s) | skipped steps %lld | "
                "final loss scale %g\n",
                (long long)r.steps, format_duration(r.seconds).c_str(), 1e3 * r.seconds_per_step,
                r.losses.empty() ? 0.0 : r.losses.back(), 100.0 * r.best_accuracy,
                format_bytes(r.peak_total_bytes).c_str(), format_bytes(r.peak_activation_bytes).c_str(),
                (long long)r.skipped_steps, r.final_scale);
    if (r.rollbacks > 0)
      std::printf("divergence: rolled back %lld time(s) to the last good checkpoint, skipping the offending batches\n",
                  (long long)r.rollbacks);
    if (!run_dir.empty()) {
      std::printf("run directory: %s (last checkpoint %s)\n", run_dir.c_str(), r.last_checkpoint.c_str());
      plot_runs({run_dir}, "");  // a missing gnuplot only costs the plot, not the run
    }
    return kExitOk;
  };
}

}  // namespace mixprec::cli
