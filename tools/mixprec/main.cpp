// main.cpp: `mixprec`, the command-line tool. Subcommands live in *_command.cpp; this file
// parses, dispatches and maps failures to the exit codes of exit_codes.h.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include "commands.h"
#include "mixprec/core/memory.h"
#include "mixprec/io/safetensors.h"
#include "exit_codes.h"
#include "stdout_check.h"
#include "suggest.h"

namespace mixprec::cli {
std::string& program_name() {
  static std::string name = "mixprec";
  return name;
}

std::string out_of_memory_message() {
  // Built without allocating much: the heap may be exhausted. fmt-free on purpose.
  const auto stats = mixprec::memory_stats();
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "out of memory: an allocation failed (std::bad_alloc) while tensors held %.1f MiB (peak %.1f MiB); "
                "lower --batch-size, use a 16-bit preset or a smaller model (docs/cli.md, Memory)",
                double(stats.total_current) / (1024.0 * 1024), double(stats.total_peak) / (1024.0 * 1024));
  return buf;
}
}  // namespace mixprec::cli

int main(int argc, char** argv) {
  using namespace mixprec::cli;
  if (argc > 0 && argv[0] && *argv[0]) program_name() = argv[0];
  CLI::App app{"mixprec: mixed-precision training of neural networks on CPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mixprec 0.1.0");
  app.footer("Exit codes: 0 ok, 1 runtime error or output not written, 2 usage error, 3 data error, 4 checkpoint error, "
             "5 training diverged, 6 run directory busy (serve, dashboard: port in use), 7 data-parallel ranks failed or disagree, "
             "8 not enough memory, 130 interrupted. "
               "See docs/cli.md.");
  // Each adder registers one subcommand (the app's newest) and returns how to run it.
  std::vector<std::pair<CLI::App*, Runner>> commands;
  for (auto add : {add_train_command, add_compare_command, add_policy_command, add_plot_command,
                   add_infer_command, add_eval_command, add_inspect_command, add_predict_command, add_serve_command, add_export_command, add_generate_command, add_summary_command, add_models_command, add_bench_command, add_sweep_command,
                   add_dashboard_command}) {
    Runner run = add(app);
    CLI::App* sub = app.get_subcommands({}).back();
    // Every command that reads checkpoints verifies their checksums (docs/checkpoints.md).
    const std::string name = sub->get_name();
    if (name == "train" || name == "eval" || name == "inspect" || name == "infer" || name == "predict" ||
        name == "serve" || name == "export")
      sub->add_flag_callback(
          "--no-verify-checksums", [] { mixprec::set_verify_checksums(false); },
          "Load checkpoints even when their checksums do not match (to salvage a damaged file)");
    commands.emplace_back(sub, std::move(run));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // An unknown command or flag is named with the closest known one; other errors (a bad
    // value) already carry their own message.
    std::string why = explain_parse_error(app, argc, argv);
    if (why.empty()) why = e.what();
    std::fprintf(stderr, "mixprec: usage error: %s\n(run 'mixprec --help' or 'mixprec <command> --help')\n",
                 why.c_str());
    return kExitUsage;
  }
  int code = kExitUsage;
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) {
        code = run();
        break;
      }
  } catch (const mixprec::Error& e) {
    std::fprintf(stderr, "mixprec: error: %s\n", e.what());
    code = exit_code_for(e.status());
  } catch (const std::bad_alloc&) {
    // Any command, anywhere: a clear message and the documented code, not "std::bad_alloc"
    // and exit code 1.
    std::fprintf(stderr, "mixprec: error: %s\n", out_of_memory_message().c_str());
    code = kExitMemory;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixprec: error: %s\n", e.what());
    code = kExitRuntime;
  }
  // Results lost on the way to stdout (a full disk, a closed descriptor) are a failure, not
  // a success with nothing to show; a command that failed already keeps its own code.
  if (!finish_stdout() && code == kExitOk) code = kExitRuntime;
  return code;
}
