// train_command.cpp: `mixprec train`: flags, the resolved-configuration table, progress
// and the end-of-run summary.
#include <cstdio>

#include "commands.h"
#include "core/cpu_features.h"
#include "exit_codes.h"
#include "mixprec/precision.h"
#include "mixprec/train.h"
#include "progress.h"

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

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto config = std::make_shared<train::TrainConfig>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: the CNN on Fashion-MNIST)");
  cmd->add_option("--model", config->model, "Model: cnn (1x28x28), seed-cnn (3x32x32), mlp")
      ->check(CLI::IsMember({"cnn", "seed-cnn", "mlp"}))
      ->capture_default_str();
  cmd->add_option("--dataset", config->dataset, "Dataset: fashion-mnist, mnist, cifar10, synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "synthetic"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", config->data_dir,
                  "Dataset folder (default: /usr/share/datasets/<dataset> where Debian installs it)");
  cmd->add_option("--precision", config->precision,
                  "Precision preset: " + amp::preset_names() + " (or O0-O3, or params=..,compute=..)")
      ->capture_default_str();
  cmd->add_flag_callback("--no-amp", [config] { config->precision = "fp32"; },
                         "Train in fp32 (same as --precision fp32)");
  cmd->add_option("--epochs", config->epochs, "Passes over the training set")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--max-steps", config->max_steps, "Stop after this many steps (-1: no limit)")
      ->capture_default_str();
  cmd->add_option("--batch-size", config->batch_size, "Images per step")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--lr", config->lr, "Learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--optimizer", config->optimizer, "Optimizer: adam, adamw, sgd")
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--momentum", config->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", config->weight_decay, "Weight decay")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--seed", config->seed, "Seed for initialisation and shuffling")->capture_default_str();
  cmd->add_option("--threads", config->threads, "Threads (0: all cores)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--init-scale", config->init_scale, "Loss scaler: initial scale")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--growth-factor", config->growth_factor, "Loss scaler: growth factor (> 1)")
      ->capture_default_str();
  cmd->add_option("--backoff-factor", config->backoff_factor, "Loss scaler: backoff factor in (0, 1)")
      ->capture_default_str();
  cmd->add_option("--growth-interval", config->growth_interval, "Loss scaler: clean steps before growing")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--hysteresis", config->hysteresis, "Loss scaler: overflows tolerated before backing off")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--min-scale", config->min_scale, "Loss scaler: lower bound of the scale (0: none)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--train-subset", config->train_subset, "Use only the first N training images")
      ->capture_default_str();
  cmd->add_flag("!--no-shuffle", config->shuffle, "Keep the dataset order");
  cmd->add_flag("!--no-eval", config->evaluate, "Skip the test-set evaluation after each epoch");

  return [config]() -> int {
    if (Status st = train::validate(*config); !st.is_ok()) {
      std::fprintf(stderr, "mixprec: usage error: %s\n", st.message().c_str());
      return kExitUsage;
    }
    Progress progress(stdout);
    train::Callbacks cb;
    cb.on_start = print_config;
    cb.on_step = [&](const train::StepReport& r) { progress.step(r); };
    cb.on_eval = [&](const train::EvalReport& r) { progress.eval(r, config->epochs); };
    auto result = train::run(*config, cb);
    progress.finish();
    if (!result.is_ok()) {
      std::fprintf(stderr, "mixprec: error: %s\n", result.status().message().c_str());
      return exit_code_for(result.status());
    }
    const train::TrainResult& r = result.value();
    std::printf("\nsummary: %lld steps in %s (%.1f ms/step median) | final loss %.4f | "
                "best test accuracy %.2f%% | peak memory %s (activations %s) | skipped steps %lld | "
                "final loss scale %g\n",
                (long long)r.steps, format_duration(r.seconds).c_str(), 1e3 * r.seconds_per_step,
                r.losses.empty() ? 0.0 : r.losses.back(), 100.0 * r.best_accuracy,
                format_bytes(r.peak_total_bytes).c_str(), format_bytes(r.peak_activation_bytes).c_str(),
                (long long)r.skipped_steps, r.final_scale);
    return kExitOk;
  };
}

}  // namespace mixprec::cli
