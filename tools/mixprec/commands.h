// commands.h: each subcommand registers its flags on the CLI11 app and returns the
// function that runs it once parsing succeeded.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/train.h"

namespace mixprec::cli {

using Runner = std::function<int()>;  // returns the process exit code

void add_training_flags(CLI::App* cmd, train::TrainConfig& config);

Runner add_train_command(CLI::App& app);
Runner add_compare_command(CLI::App& app);
Runner add_policy_command(CLI::App& app);
Runner add_plot_command(CLI::App& app);
Runner add_infer_command(CLI::App& app);
Runner add_eval_command(CLI::App& app);
Runner add_inspect_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
// "fp32,amp-bf16" -> {"fp32", "amp-bf16"} (empty items dropped).
std::vector<std::string> split_commas(const std::string& s);
// A numeric flag bound with a plain message: "--steps: must be >= 1, got 0".
CLI::Validator at_least(double min);
CLI::Validator positive();  // > 0, for real-valued flags (--lr)
// Draws metrics.jsonl of the run directories with gnuplot (RUN/training.{png,svg}).
int plot_runs(const std::vector<std::string>& run_dirs, const std::string& output);

}  // namespace mixprec::cli
