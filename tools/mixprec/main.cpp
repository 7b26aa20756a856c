// main.cpp: `mixprec`, the command-line tool. Subcommands live in *_command.cpp; this file
// parses, dispatches and maps failures to the exit codes of exit_codes.h.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <vector>

#include "commands.h"
#include "exit_codes.h"

int main(int argc, char** argv) {
  using namespace mixprec::cli;
  CLI::App app{"mixprec: mixed-precision training of neural networks on CPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mixprec 0.1.0");
  app.footer("Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 data error, 4 checkpoint error, "
             "5 training diverged. See docs/cli.md.");
  std::vector<std::pair<CLI::App*, Runner>> commands;
  commands.emplace_back(nullptr, add_train_command(app));
  commands.back().first = app.get_subcommand("train");
  commands.emplace_back(nullptr, add_compare_command(app));
  commands.back().first = app.get_subcommand("compare");
  commands.emplace_back(nullptr, add_policy_command(app));
  commands.back().first = app.get_subcommand("policy");
  commands.emplace_back(nullptr, add_plot_command(app));
  commands.back().first = app.get_subcommand("plot");
  commands.emplace_back(nullptr, add_infer_command(app));
  commands.back().first = app.get_subcommand("infer");
  commands.emplace_back(nullptr, add_eval_command(app));
  commands.back().first = app.get_subcommand("eval");
  commands.emplace_back(nullptr, add_inspect_command(app));
  commands.back().first = app.get_subcommand("inspect");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "mixprec: usage error: %s\n(run 'mixprec --help' or 'mixprec <command> --help')\n",
                 e.what());
    return kExitUsage;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
  } catch (const mixprec::Error& e) {
    std::fprintf(stderr, "mixprec: error: %s\n", e.what());
    return exit_code_for(e.status());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixprec: error: %s\n", e.what());
    return kExitRuntime;
  }
  return kExitUsage;
}
