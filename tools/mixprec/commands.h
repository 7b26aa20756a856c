// commands.h: each subcommand registers its flags on the CLI11 app and returns the
// function that runs it once parsing succeeded.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace mixprec::cli {

using Runner = std::function<int()>;  // returns the process exit code

Runner add_train_command(CLI::App& app);

}  // namespace mixprec::cli
