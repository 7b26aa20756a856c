// suggest.cpp: see suggest.h.
#include "suggest.h"

#include "inference_messages.h"

#include <algorithm>
#include <cctype>

#include "mixprec/infer/infer.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/core/names.h"
#include "mixprec/amp/precision.h"

namespace mixprec::cli {

using mixprec::closest_name;
using mixprec::did_you_mean;

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

CLI::Validator one_of(const std::vector<std::string>& names) {
  return CLI::Validator(
      [names](std::string& value) -> std::string {
        if (std::find(names.begin(), names.end(), value) != names.end()) return "";
        return "expected one of: " + join(names) + "; got '" + value + "'" + did_you_mean(value, names);
      },
      "{" + join(names) + "}");
}

CLI::Validator model_name(const std::vector<std::string>& names) {
  return CLI::Validator(
      [names](std::string& value) -> std::string {
        if (nn::is_model_file(value) || std::find(names.begin(), names.end(), value) != names.end()) return "";
        return "expected one of: " + join(names) + ", or a model file FILE.yaml|.yml|.json; got '" + value + "'" +
               did_you_mean(value, names);
      },
      "{" + join(names) + "} or FILE.yaml");
}

CLI::Validator precision_name() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto p = amp::preset_by_name(value);
        if (p.is_ok()) return "";
        std::vector<std::string> names;
        for (const auto& preset : amp::all_presets()) names.push_back(preset.name);
        for (const auto& [alias, target] : amp::preset_aliases()) names.push_back(alias);
        return p.status().message() + did_you_mean(value, names);
      },
      "PRESET");
}

CLI::Validator inference_precision() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (amp::preset_by_name(infer::inference_preset_name(value)).is_ok()) return "";
        std::vector<std::string> names = {"fp32", "bf16", "fp16"};
        for (const auto& preset : amp::all_presets()) names.push_back(preset.name);
        return "unknown precision '" + value + "' (expected " + inference_precision_help() + ")" +
               did_you_mean(value, names);
      },
      "PRECISION");
}

std::string explain_parse_error(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  if (argc < 2) return "";
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-') return "";
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands({}))
    if (s->get_name() == first) sub = s;
  if (!sub)
    return "unknown command '" + first + "'" + did_you_mean(first, commands) + "; commands: " + join(commands);
  std::vector<std::string> flags;
  for (const CLI::Option* o : sub->get_options()) {
    for (const auto& l : o->get_lnames()) flags.push_back("--" + l);
    for (const auto& s : o->get_snames()) flags.push_back("-" + s);
  }
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (arg[1] != '-' && std::isdigit(static_cast<unsigned char>(arg[1]))) continue;  // "-1"
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) continue;
    return "unknown flag '" + name + "' for 'mixprec " + sub->get_name() + "'" + did_you_mean(name, flags);
  }
  return "";
}

}  // namespace mixprec::cli
