// training_flags.cpp: the flags shared by `train`, `compare` and `bench`: one table, so a
// flag means the same thing in every command.
#include "commands.h"
#include "mixprec/precision.h"
#include "suggest.h"

namespace mixprec::cli {

void add_training_flags(CLI::App* cmd, train::TrainConfig& config) {
  cmd->add_option("--model", config.model,
                  "Model: cnn (1x28x28), seed-cnn (3x32x32), mlp, transformer (128 tokens x 256)")
      ->check(one_of({"cnn", "seed-cnn", "mlp", "transformer"}))
      ->capture_default_str();
  cmd->add_option("--dataset", config.dataset, "Dataset: fashion-mnist, mnist, cifar10, synthetic")
      ->check(one_of({"fashion-mnist", "mnist", "cifar10", "synthetic"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", config.data_dir,
                  "Dataset folder (default: /usr/share/datasets/<dataset> where Debian installs it)");
  cmd->add_option("--precision", config.precision,
                  "Precision preset: " + amp::preset_names() +
                      " (aliases: bf16-mixed, bf16, 16-mixed, fp16, bf16-true, 16-true, 32, f32, O0-O3; "
                      "or params=..,compute=..)")
      ->check(precision_name())
      ->capture_default_str();
  cmd->add_flag_callback("--no-amp", [&config] { config.precision = "fp32"; },
                         "Train in fp32 (same as --precision fp32)");
  cmd->add_option("--epochs", config.epochs, "Passes over the training set")
      ->check(at_least(1))->capture_default_str();
  cmd->add_option("--max-steps", config.max_steps, "Stop after this many steps (-1: no limit)")
      ->capture_default_str();
  cmd->add_option("--batch-size", config.batch_size, "Images per step")
      ->check(integer_in(1, int64_t(1) << 24))->capture_default_str();
  cmd->add_option("--lr", config.lr, "Learning rate")->check(positive())->capture_default_str();
  cmd->add_option("--optimizer", config.optimizer, "Optimizer: adam, adamw, sgd")
      ->check(one_of({"adam", "adamw", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--momentum", config.momentum, "SGD momentum")->check(at_least(0))->capture_default_str();
  cmd->add_option("--weight-decay", config.weight_decay, "Weight decay")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--seed", config.seed, "Seed for initialisation and shuffling")
      ->check(unsigned_integer())->capture_default_str();
  cmd->add_option("--threads", config.threads, "Threads (0: all cores; at most 4x the hardware threads)")
      ->check(integer_in(0, 1 << 20))->capture_default_str();
  cmd->add_option("--init-scale", config.init_scale, "Loss scaler: initial scale")
      ->check(positive())->capture_default_str();
  cmd->add_option("--growth-factor", config.growth_factor, "Loss scaler: growth factor (> 1)")
      ->capture_default_str();
  cmd->add_option("--backoff-factor", config.backoff_factor, "Loss scaler: backoff factor in (0, 1)")
      ->capture_default_str();
  cmd->add_option("--growth-interval", config.growth_interval, "Loss scaler: clean steps before growing")
      ->check(at_least(1))->capture_default_str();
  cmd->add_option("--hysteresis", config.hysteresis, "Loss scaler: overflows tolerated before backing off")
      ->check(at_least(1))->capture_default_str();
  cmd->add_option("--min-scale", config.min_scale, "Loss scaler: lower bound of the scale (0: none)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--clip-grad-norm", config.clip_grad_norm, "Clip the global gradient norm (0: off)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--accumulate", config.accumulate, "Micro-batches per optimizer step")
      ->check(at_least(1))->capture_default_str();
  cmd->add_option_function<std::string>(
         "--inject-nonfinite",
         [&config](const std::string& v) {
           // STEP[:PARAM]: fault injection, an inf in one gradient at that step.
           const auto colon = v.find(':');
           try {
             config.inject_nonfinite_step = std::stoll(v.substr(0, colon));
           } catch (...) {
             throw CLI::ValidationError("--inject-nonfinite", "expected STEP[:PARAM], got '" + v + "'");
           }
           if (config.inject_nonfinite_step < 1)
             throw CLI::ValidationError("--inject-nonfinite", "STEP must be >= 1, got '" + v + "'");
           config.inject_nonfinite_param = colon == std::string::npos ? "" : v.substr(colon + 1);
         },
         "Write inf into a gradient at STEP (of PARAM, e.g. fc1.weight), to test the loss scaler")
      ->type_name("STEP[:PARAM]");
  cmd->add_option("--loss-spike", config.loss_spike_factor,
                  "Treat a loss above this multiple of the median of the last 50 steps as divergence (0: off)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--on-divergence", config.on_divergence,
                  "On a NaN/inf loss without a scaler, or a loss spike: stop, or rollback to the last "
                  "checkpoint and skip the offending batch")
      ->check(one_of({"stop", "rollback"}))->capture_default_str();
  cmd->add_option("--max-rollbacks", config.max_rollbacks, "Rollbacks allowed before a divergence stops the run")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--eval-every", config.eval_every, "Also evaluate every N steps (0: after each epoch)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--save-every", config.save_every, "Also checkpoint every N steps (0: after each epoch)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--run-dir", config.run_dir,
                  "Run directory for config.json, metrics.jsonl, checkpoints and plots "
                  "(default: runs/train, runs/train2, ...; 'none': write nothing)");
  cmd->add_option("--resume", config.resume, "Continue a run exactly: its run directory or a checkpoint");
  cmd->add_flag("--overwrite", config.overwrite,
                "Let a new run replace the run already in --run-dir (its checkpoints, metrics and config)");
  cmd->add_option("--init-from", config.init_from, "Start from weights in a .safetensors file (PyTorch names)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("!--no-self-check", config.self_check, "Skip the AMP self-check before 16-bit training");
  cmd->add_option("--train-subset", config.train_subset, "Use only the first N training images")
      ->capture_default_str();
  cmd->add_flag("!--no-shuffle", config.shuffle, "Keep the dataset order");
  cmd->add_flag("!--no-eval", config.evaluate, "Skip the test-set evaluation after each epoch");

}

}  // namespace mixprec::cli
