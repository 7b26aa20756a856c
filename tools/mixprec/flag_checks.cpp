// flag_checks.cpp: flag-value helpers shared by the subcommands: comma lists and numeric
// bounds whose messages say what is expected in words ("must be >= 1, got 0").
#include <cstdio>
#include <sstream>

#include "commands.h"

namespace mixprec::cli {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

CLI::Validator at_least(double min) {
  std::ostringstream bound;
  bound << min;
  return CLI::Validator(
      [min, b = bound.str()](std::string& value) -> std::string {
        double v = 0;
        std::istringstream in(value);
        if (!(in >> v)) return "expected a number >= " + b + ", got '" + value + "'";
        return v >= min ? std::string() : "must be >= " + b + ", got " + value;
      },
      ">=" + bound.str());
}

void add_checkpoint_argument(CLI::App* cmd, std::string& positional, std::string& flag, const std::string& help) {
  cmd->add_option("checkpoint", positional, help);
  cmd->add_option("--checkpoint", flag, "The same, as a flag");
}

std::optional<std::string> chosen_checkpoint(const std::string& positional, const std::string& flag) {
  if (positional.empty() && flag.empty()) {
    std::fprintf(stderr, "mixprec: usage error: a checkpoint is required: give it as CHECKPOINT or --checkpoint "
                         "CHECKPOINT (a .safetensors file or a run directory)\n");
    return std::nullopt;
  }
  if (!positional.empty() && !flag.empty() && positional != flag) {
    std::fprintf(stderr, "mixprec: usage error: two checkpoints given ('%s' and --checkpoint '%s'): give one\n",
                 positional.c_str(), flag.c_str());
    return std::nullopt;
  }
  return positional.empty() ? flag : positional;
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double v = 0;
        std::istringstream in(value);
        if (!(in >> v)) return "expected a number > 0, got '" + value + "'";
        return v > 0 ? std::string() : "must be > 0, got " + value;
      },
      ">0");
}

}  // namespace mixprec::cli
