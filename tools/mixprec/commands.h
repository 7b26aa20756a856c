// commands.h: each subcommand registers its flags on the CLI11 app and returns the
// function that runs it once parsing succeeded.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/threads.h"
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
// default) is OMP_NUM_THREADS if set, else the adaptive count (mixprec/core/threads.h), else 1 to
// max_thread_count() as train accepts.
void add_threads_option(CLI::App* cmd, int& threads);
// The command's one thread policy, made by the first call (at the command's start, so that
// loading the model is its first measuring window); later calls return the same object.
ThreadPolicy& thread_policy(int threads);
// Applies the policy on the calling thread (OpenMP's count is per thread): the first
// decision when none was made yet (it waits for the rest of a short window), else the
// policy's re-decision every half second. Call it before each batch of work.
void use_threads(int threads);
// "threads: adaptive (now 1 of 2: other processes busy on ~1.6 cores)" for a command's
// report, or "" when the user chose the count (--threads, OMP_NUM_THREADS) or, with
// only_if_fewer, when the policy computes on every core.
std::string adaptive_threads_note(int threads, bool only_if_fewer = false);
// The checkpoint of eval, infer and inspect, given either way: `eval C` or `eval --checkpoint C`.
void add_checkpoint_argument(CLI::App* cmd, std::string& positional, std::string& flag, const std::string& help);
// The one given; none or two different ones is a usage error (printed; nullopt returned).
std::optional<std::string> chosen_checkpoint(const std::string& positional, const std::string& flag);
// Draws metrics.jsonl of the run directories with gnuplot (RUN/training.{png,svg}).
int plot_runs(const std::vector<std::string>& run_dirs, const std::string& output);

}  // namespace mixprec::cli
