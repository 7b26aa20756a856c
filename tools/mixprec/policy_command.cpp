// policy_command.cpp: `mixprec policy`: the autocast policy table and the presets.
#include <cstdio>

#include "commands.h"
#include "mixprec/amp/amp.h"
#include "mixprec/amp/precision.h"

namespace mixprec::cli {

Runner add_policy_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("policy", "Print the autocast policy table and the precision presets");
  return [cmd]() -> int {
    (void)cmd;
    // The table the ops apply (every op consults its row; autocast_table_test checks each
    // one) and the listed differences from PyTorch, both from src/amp/policy.cpp.
    std::printf("Autocast policy (the dtype each op runs in for f32 inputs under autocast bf16 / f16)\n\n%s\n",
                amp::policy_table_string().c_str());
    std::printf("lower: cast to the autocast dtype | fp32: cast to f32 | promote: widest input dtype |"
                " keep: input dtype. f64 and integer tensors are never cast.\n\n");
    std::printf("Precision presets (--precision)\n\n%-10s %-3s %-9s %-6s %-7s %-7s %s\n", "name", "lvl",
                "autocast", "params", "masters", "scaler", "description");
    for (const auto& p : amp::all_presets())
      std::printf("%-10s %-3s %-9s %-6s %-7s %-7s %s\n", p.name.c_str(), p.level,
                  p.autocast_dtype ? dtype_name(*p.autocast_dtype) : "-", dtype_name(p.param_dtype),
                  p.master_weights ? "f32" : "-", p.loss_scaling ? "dynamic" : "-", p.description);
    return 0;
  };
}

}  // namespace mixprec::cli
