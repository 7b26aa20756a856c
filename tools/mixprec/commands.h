// commands.h: each subcommand registers its flags on the CLI11 app and returns the
// function that runs it once parsing succeeded.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/train/train.h"

namespace mixprec::cli {

using Runner = std::function<int()>;  // returns the process exit code

// How the user invoked the tool (argv[0]: "mixprec", "build/mixprec"), for commands we print
// for them to run next (the resume command after Ctrl-C).
std::string& program_name();
// The message for a std::bad_alloc caught at a command boundary (exit code 8, kExitMemory).
std::string out_of_memory_message();

void add_training_flags(CLI::App* cmd, train::TrainConfig& config);

Runner add_train_command(CLI::App& app);
Runner add_compare_command(CLI::App& app);
Runner add_policy_command(CLI::App& app);
Runner add_plot_command(CLI::App& app);
Runner add_infer_command(CLI::App& app);
Runner add_eval_command(CLI::App& app);
Runner add_inspect_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_predict_command(CLI::App& app);
Runner add_serve_command(CLI::App& app);
Runner add_export_command(CLI::App& app);
Runner add_generate_command(CLI::App& app);
Runner add_summary_command(CLI::App& app);
Runner add_models_command(CLI::App& app);
Runner add_sweep_command(CLI::App& app);
Runner add_dashboard_command(CLI::App& app);
// "fp32,amp-bf16" -> {"fp32", "amp-bf16"} (empty items dropped).
std::vector<std::string> split_commas(const std::string& s);
// A numeric flag bound with a plain message: "--steps: must be >= 1, got 0".
CLI::Validator at_least(double min);
// An integer in [min, max], parsed exactly (an overflowing value is refused, not wrapped).
CLI::Validator integer_in(int64_t min, int64_t max);
// An integer >= min, parsed exactly (up to 2^63-1).
CLI::Validator integer_from(int64_t min);
// A non-negative integer that fits 64 bits (a seed: "-1" is refused, not wrapped to 2^64-1).
CLI::Validator unsigned_integer();
CLI::Validator positive();  // > 0, for real-valued flags (--lr)
// --threads for a command that computes (predict, generate, eval, serve, ...): 0 (the
// default) leaves OpenMP's choice, else 1 to max_thread_count() as train accepts; and the
// call that applies it before the command's work.
void add_threads_option(CLI::App* cmd, int& threads);
void use_threads(int threads);
// The checkpoint of eval, infer and inspect, given either way: `eval C` or `eval --checkpoint C`.
void add_checkpoint_argument(CLI::App* cmd, std::string& positional, std::string& flag, const std::string& help);
// The one given; none or two different ones is a usage error (printed; nullopt returned).
std::optional<std::string> chosen_checkpoint(const std::string& positional, const std::string& flag);
// Draws metrics.jsonl of the run directories with gnuplot (RUN/training.{png,svg}).
int plot_runs(const std::vector<std::string>& run_dirs, const std::string& output);

}  // namespace mixprec::cli
