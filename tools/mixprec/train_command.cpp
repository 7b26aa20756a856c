// train_command.cpp: `mixprec train`: flags, the resolved-configuration table, progress
// and the end-of-run summary.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>

#include "mixprec/dist/distributed.h"
#include "mixprec/io/files.h"
#include "mixprec/core/hardware.h"
#include "commands.h"
#include "exit_codes.h"
#include "mixprec/amp/precision.h"
#include "mixprec/io/run_dir.h"
#include "mixprec/train/train.h"
#include "progress.h"
#include "mixprec/train/train_config.h"

namespace mixprec::cli {

namespace {

// A number as the user typed it on the command line ("1e-3"), else the shortest text that
// reads back as the value ("0.001", never "0.001000").
std::string as_typed(CLI::App* cmd, const char* flag, double value) {
  if (const CLI::Option* o = cmd->get_option_no_throw(flag); o && o->count() > 0 && !o->results().empty())
    return o->results().back();
  return train::number_text(value);
}

// How each dtype's matrix work (matmul, convolution) runs here, without the "bf16: " prefix
// that compute_path() starts with: the table row already names the dtype.
std::string compute_row(DType dtype) {
  const std::string line = compute_path(dtype);
  const std::string prefix = std::string(dtype_name(dtype)) + ": ";
  return line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : line;
}

// The warning for a preset that computes in bf16 on a CPU where bf16 is emulated: such a run
// has half the activation memory of fp32 but none of its speed-up (measured on a 2-core AMD
// Zen 3: the seed CNN's amp-bf16 step 1.0-1.2x the time of fp32; docs/benchmarks.md).
std::string bf16_warning() {
  if (runs_natively(DType::bf16)) return "";
  return "this CPU has no AVX-512, so oneDNN has no bf16 kernels here: bf16 matrix work is emulated on "
         "the f32 kernels (same numerics as a native bf16 kernel, activations still half the memory) "
         "and is no faster than fp32; for speed on this CPU use --precision fp32";
}

void print_config(CLI::App* cmd, const train::TrainConfig& c,
                  const std::vector<std::pair<std::string, std::string>>& extra) {
  // Each field once: precision, model, dataset, steps come from the trainer's rows (they
  // are resolved there), the rest from the flags as typed.
  std::vector<std::pair<std::string, std::string>> rows = extra;
  const std::vector<std::pair<std::string, std::string>> mine = {
      {"optimizer", c.optimizer + " (lr " + as_typed(cmd, "--lr", c.lr) + ", weight decay " +
                        as_typed(cmd, "--weight-decay", c.weight_decay) + ")"},
      {"lr schedule", (c.lr_schedule == "constant" ? std::string("constant")
                                                  : c.lr_schedule + " to " + as_typed(cmd, "--min-lr", c.min_lr)) +
                          (c.warmup_steps > 0 ? ", " + std::to_string(c.warmup_steps) + " warm-up steps" : "")},
      {"epochs", std::to_string(c.epochs)},
      {"max steps", c.max_steps < 0 ? "none" : std::to_string(c.max_steps)},
      {"batch size", std::to_string(c.batch_size)},
      {"seed", std::to_string(c.seed)},
      {"cpu", cpu_summary()},
      {"f32 compute", compute_row(DType::f32)},
      {"bf16 compute", compute_row(DType::bf16)},
      {"f16 compute", compute_row(DType::f16)},
  };
  rows.insert(rows.end(), mine.begin(), mine.end());
  // 80 columns: a long value continues on the next row, broken between words.
  const size_t width = 58;
  std::printf("| %-14s | %-58s |\n", "Parameter", "Value");
  std::printf("|%s|%s|\n", std::string(16, '-').c_str(), std::string(60, '-').c_str());
  for (auto& [k, v] : rows) {
    std::string rest = v, key = k;
    do {
      size_t cut = rest.size();
      if (cut > width) {
        cut = rest.rfind(' ', width);
        if (cut == std::string::npos || cut == 0) cut = width;
      }
      std::printf("| %-14s | %-58s |\n", key.c_str(), rest.substr(0, cut).c_str());
      rest = rest.substr(std::min(rest.size(), cut + (cut < rest.size() && rest[cut] == ' ')));
      key.clear();
    } while (!rest.empty());
  }
  std::fflush(stdout);
}

// Ctrl-C: the first asks the trainer to stop after the current step (it saves a checkpoint
// and returns); SA_RESETHAND makes a second one kill the process at once.
std::atomic<bool> g_stop_requested{false};

void on_sigint(int) {
  g_stop_requested.store(true);
  static const char kMsg[] = "\nmixprec: interrupted: stopping after this step (Ctrl-C again to abort)\n";
  const ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)ignored;
}

// Under mpirun, Ctrl-C ends the whole job at once (mpirun kills its ranks; the last
// checkpoint stays intact), but mpirun forwards SIGUSR1 to every rank: `kill -USR1 <mpirun's
// pid>` stops all ranks after the same step with a checkpoint (docs/distributed.md).
void on_sigusr1(int) {
  g_stop_requested.store(true);
  static const char kMsg[] = "mixprec: SIGUSR1: stopping after this step with a checkpoint\n";
  const ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)ignored;
}

void install_sigint_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  struct sigaction usr {};
  usr.sa_handler = on_sigusr1;
  sigemptyset(&usr.sa_mask);
  sigaction(SIGUSR1, &usr, nullptr);
}

// A run directory this command created that holds no step yet (the run failed before its
// first step): nothing in it is worth keeping, so it goes.
void remove_if_unused(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json") continue;
    if (name == "run.lock") continue;  // released when train::run returned; it holds no data
    if (name == "metrics.jsonl" && entry.file_size(ec) == 0) continue;
    return;  // a checkpoint, logged steps or a file the user put there: keep everything
  }
  fs::remove_all(dir, ec);
}

// "0.00%" would claim a measurement: a run without evaluation says so.
std::string accuracy_text(const train::TrainResult& r, bool best) {
  if (r.evals.empty()) return "not evaluated";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * (best ? r.best_accuracy : r.final_accuracy));
  return buf;
}

// --resume of a finished run: what it reached, and how to train it further.
void print_finished(const train::TrainConfig& c, const train::TrainResult& r) {
  const std::string where = !r.run_dir.empty() ? r.run_dir : c.resume;
  std::printf("\nrun %s already finished: step %lld of %lld, final test accuracy %s (best %s)\n", where.c_str(),
              (long long)r.steps, (long long)r.planned_steps, accuracy_text(r, false).c_str(),
              accuracy_text(r, true).c_str());
  if (!r.last_checkpoint.empty()) std::printf("last checkpoint: %s\n", r.last_checkpoint.c_str());
  if (c.max_steps > 0 && c.max_steps <= r.steps)
    std::printf("to train longer, raise --max-steps: %s train --resume %s --max-steps %lld\n",
                program_name().c_str(), where.c_str(), (long long)(2 * c.max_steps));
  else
    std::printf("to train longer, raise --epochs: %s train --resume %s --epochs %lld\n", program_name().c_str(),
                where.c_str(), (long long)(c.epochs + 1));
}

std::string skipped_text(const train::TrainResult& r) {
  std::string s = std::to_string(r.skipped_steps);
  if (r.skipped_by_tensor.empty()) return s;
  s += " (inf/NaN gradients in";
  const size_t shown = std::min<size_t>(r.skipped_by_tensor.size(), 5);
  for (size_t i = 0; i < shown; ++i)
    s += (i ? ", " : " ") + r.skipped_by_tensor[i].first + " x" + std::to_string(r.skipped_by_tensor[i].second);
  if (r.skipped_by_tensor.size() > shown)
    s += ", and " + std::to_string(r.skipped_by_tensor.size() - shown) + " more tensors";
  return s + ")";
}

// Whether the setting `key` was given on this command line (its flag, or --no-amp for the
// precision): such a value wins over a configuration file and a resumed run's config.json.
bool flag_given(CLI::App* cmd, const std::string& key) {
  if (key == "precision" && cmd->get_option("--no-amp")->count() > 0) return true;
  const train::ConfigField* f = train::find_config_field(key);
  const CLI::Option* o = f && !f->flag.empty() ? cmd->get_option_no_throw(f->flag) : nullptr;
  return o != nullptr && o->count() > 0;
}

// --config FILE: the settings in a JSON file (config.json's keys), below the flags given.
Status apply_config_file(CLI::App* cmd, const std::string& path, train::TrainConfig& config) {
  auto text = io::read_regular_file(path, "configuration file", uint64_t(1) << 20);
  if (!text.is_ok()) return Status::invalid_argument("--config: " + text.status().message());
  auto merged = train::apply_config_file(config, *text, path, [cmd](const std::string& key) { return flag_given(cmd, key); });
  if (!merged.is_ok()) return merged.status();
  config = *merged;
  return Status::ok();
}

// --resume continues with the run's own settings (as Ultralytics' resume does); a flag given
// on this command line wins over the saved value.
Status adopt_resumed_config(CLI::App* cmd, train::TrainConfig& config) {
  // config.json of the run being resumed: RUN_DIR/config.json, or the one beside a checkpoint.
  const std::string dir = train::run_dir_of(config);
  if (dir.empty()) return Status::ok();  // --resume names nothing that exists: the resume says so
  const std::string path = dir + "/config.json";
  auto saved = read_run_config(path);  // a FIFO or device there is refused, never waited on
  if (!saved.is_ok()) return Status(StatusCode::bad_checkpoint, saved.status().message());
  if (!saved->has_value()) return Status::ok();  // no config.json: the flags as given (restore checks the rest)
  const std::string& text = **saved;
  auto given = [cmd](const std::string& key) { return flag_given(cmd, key); };
  auto merged = train::adopt_saved_config(config, text, given);
  if (!merged.is_ok()) return Status(StatusCode::bad_checkpoint, path + ": " + merged.status().message());
  config = *merged;
  std::printf("resuming with the configuration in %s (flags on the command line win)\n", path.c_str());
  return Status::ok();
}

// One training run of `mixprec train` on this rank. Failures go through `fail`, which prints
// (a usage error on rank 0 only: every rank has it) and ends an mpirun job on every rank.
int run_training(train::TrainConfig& config, CLI::App* cmd, const std::string& config_file, int rank,
                 const std::function<int(const Status&, const char*)>& fail) {
  namespace fs = std::filesystem;
  if (!config_file.empty()) {
    if (!config.resume.empty())
      return fail(Status::invalid_argument("--config cannot be combined with --resume (a resume continues with the "
                                           "run's own config.json)"),
                  "usage error");
    if (Status st = apply_config_file(cmd, config_file, config); !st.is_ok())
      return fail(Status::invalid_argument(st.message()), "usage error");
  }
  if (!config.resume.empty()) {
    if (Status st = adopt_resumed_config(cmd, config); !st.is_ok()) return fail(st, "error");
  }
  if (Status st = train::validate(config); !st.is_ok()) return fail(Status::invalid_argument(st.message()), "usage error");
  // The run directory (rank 0's): auto-named unless given; --run-dir none writes nothing. One
  // this command creates is removed again if the run fails before its first step.
  std::string created_dir;
  if (rank == 0) {
    std::error_code ec;
    if (!config.run_dir.empty() && config.run_dir != "none" && !fs::exists(config.run_dir, ec))
      created_dir = config.run_dir;
  }
  if (config.run_dir == "none") {
    config.run_dir.clear();
  } else if (config.run_dir.empty() && config.resume.empty() && rank == 0) {
    auto rd = create_run_dir("runs");
    if (!rd.is_ok()) return fail(rd.status(), "error");
    config.run_dir = rd->path;
    created_dir = rd->path;
  }
  Progress progress(stdout);
  train::Callbacks cb;
  if (rank == 0) {
    cb.on_start = [cmd](const train::TrainConfig& c, const std::vector<std::pair<std::string, std::string>>& extra) {
      print_config(cmd, c, extra);
      const std::string warning = bf16_warning();
      auto preset = amp::preset_by_name(c.precision);
      if (!warning.empty() && preset.is_ok() && preset->compute_dtype == DType::bf16)
        std::fprintf(stderr, "mixprec: warning: %s\n", warning.c_str());
    };
    cb.on_step = [&](const train::StepReport& r) { progress.step(r); };
    cb.on_eval = [&](const train::EvalReport& r) { progress.eval(r, config.epochs); };
  }
  const std::string who = dist::world().size() > 1 ? "rank " + std::to_string(rank) + ": " : "";
  cb.on_warning = [who](const std::string& w) { std::fprintf(stderr, "mixprec: warning: %s%s\n", who.c_str(), w.c_str()); };
  cb.stop_requested = [] { return g_stop_requested.load(); };
  install_sigint_handler();
  // An allocation that fails anyway (the estimate is not exact, or the machine's memory went
  // to another process) becomes a Status here, so the run directory it created is cleaned
  // up and, under mpirun, the other ranks are stopped (fail) with the same code.
  StatusOr<train::TrainResult> result = Status::internal("not run");
  try {
    result = train::run(config, cb);
  } catch (const std::bad_alloc&) {
    result = Status::resource_exhausted(out_of_memory_message());
  }
  signal(SIGINT, SIG_DFL);
  progress.finish();
  if (!result.is_ok()) {
    remove_if_unused(created_dir);
    return fail(result.status(), "error");
  }
  const train::TrainResult& r = result.value();
  if (rank != 0) return r.interrupted ? kExitInterrupted : kExitOk;  // rank 0 reports
  if (r.already_finished) {
    print_finished(config, r);
    return kExitOk;
  }
  const std::string& run_dir = r.run_dir;  // "" with --run-dir none
  char scale[32] = "\u2013";  // an en dash: the preset has no loss scaler
  if (r.loss_scaling) std::snprintf(scale, sizeof scale, "%g", r.final_scale);
  // Three short lines rather than one that wraps in an 80-column terminal.
  std::printf("\nsummary: %lld steps in %s (%.1f ms/step median) | final loss %.4f\n"
              "         best test accuracy %s | final loss scale %s\n"
              "         peak memory %s (activations %s) | skipped steps %s\n",
              (long long)r.steps, format_duration(r.seconds).c_str(), 1e3 * r.seconds_per_step,
              r.losses.empty() ? 0.0 : r.losses.back(), accuracy_text(r, true).c_str(), scale,
              format_bytes(r.peak_total_bytes).c_str(), format_bytes(r.peak_activation_bytes).c_str(),
              skipped_text(r).c_str());
  if (r.ranks > 1 && r.step_seconds > 0) {
    const double steps = double(std::max<int64_t>(r.steps - r.first_step + 1, 1));
    std::printf("data-parallel: %d ranks; rank 0 spent %.1f%% of its step time waiting for the others "
                "(%.2f ms/step: step rendezvous, gradient buckets still in flight after backward, loss and flags)\n"
                "         %.1f gradient buckets per step, %.1f of them started while backward was running\n",
                r.ranks, 100.0 * r.communication_seconds / r.step_seconds, 1e3 * r.communication_seconds / steps,
                double(r.gradient_buckets) / steps, double(r.gradient_buckets_early) / steps);
  }
  if (r.rollbacks > 0)
    std::printf("divergence: rolled back %lld time(s) to the last good checkpoint, skipping the offending batches\n",
                (long long)r.rollbacks);
  if (!run_dir.empty()) {
    std::printf("run directory: %s (last checkpoint %s)\n", run_dir.c_str(), r.last_checkpoint.c_str());
    if (!r.interrupted) plot_runs({run_dir}, "");  // a missing gnuplot only costs the plot, not the run
  }
  if (r.interrupted) {
    if (run_dir.empty())
      std::printf("interrupted at step %lld of %lld; nothing was saved (--run-dir none)\n", (long long)r.steps,
                  (long long)r.planned_steps);
    else
      std::printf("interrupted at step %lld of %lld; checkpoint and metrics saved. Resume with:\n"
                  "  %s train --resume %s\n",
                  (long long)r.steps, (long long)r.planned_steps, program_name().c_str(), run_dir.c_str());
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto config = std::make_shared<train::TrainConfig>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: the CNN on Fashion-MNIST)");
  add_training_flags(cmd, *config);
  auto config_file = std::make_shared<std::string>();
  cmd->add_option("--config", *config_file,
                  "Settings from a JSON file, or a YAML file (.yaml/.yml), with config.json's keys (e.g. a run's config.json, "
                  "recipes/*.yaml); flags given win");

  return [config, cmd, config_file]() -> int {
    // Under mpirun this process is one rank of a data-parallel job (docs/distributed.md):
    // rank 0 prints and writes the run directory; the others print only their own problems.
    if (Status st = dist::init_world(); !st.is_ok()) {
      std::fprintf(stderr, "mixprec: error: %s\n", st.message().c_str());
      return exit_code_for(st);
    }
    const int rank = dist::world().rank();
    const bool many = dist::world().size() > 1;
    const std::string who = many ? "rank " + std::to_string(rank) + ": " : "";
    auto fail = [&](const Status& st, const char* kind) {
      if (rank == 0 || st.code() != StatusCode::invalid_argument)
        std::fprintf(stderr, "mixprec: %s: %s%s\n", kind, who.c_str(), st.message().c_str());
      const int code = exit_code_for(st);
      if (many) dist::world().abort(code);  // the other ranks must not wait for this one
      return code;
    };
    const int code = run_training(*config, cmd, *config_file, rank, fail);
    dist::finalize_world();
    return code;
  };
}

}  // namespace mixprec::cli
