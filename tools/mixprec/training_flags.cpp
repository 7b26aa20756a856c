// training_flags.cpp: the flags shared by `train`, `compare` and `bench`, made from the one
// table of settings (mixprec/train/train_config.h), so a flag means the same thing in every command
// and in config.json. Only what one row cannot say is written here: --precision's aliases,
// --no-amp, and --inject-nonfinite STEP[:PARAM] (one flag, two settings).
#include <cmath>
#include <cstdint>

#include "commands.h"
#include "mixprec/amp/precision.h"
#include "mixprec/train/train_config.h"
#include "suggest.h"

namespace mixprec::cli {

namespace {

// The command-line check of a numeric row: integers parsed exactly (an overflowing value is
// refused, not wrapped), reals against the row's bounds.
CLI::Validator numeric_check(const train::ConfigField& f, bool integral, bool is_unsigned) {
  if (is_unsigned) return unsigned_integer();
  if (integral) {
    const int64_t lo = std::isfinite(f.min) ? int64_t(f.min) + (f.min_open ? 1 : 0) : INT64_MIN;
    if (!std::isfinite(f.max)) return integer_from(lo);
    return integer_in(lo, int64_t(f.max) - (f.max_open ? 1 : 0));
  }
  if (f.min == 0 && f.min_open && !std::isfinite(f.max)) return positive();
  if (std::isfinite(f.min) && !f.min_open && !std::isfinite(f.max)) return at_least(f.min);
  return CLI::Validator();  // other bounds (e.g. (0, 1)): train::validate() names them
}

void add_field(CLI::App* cmd, const train::ConfigField& f, train::TrainConfig& config) {
  std::visit(
      [&](auto member) {
        auto& v = config.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          // A switch that is on by default is turned off by its "--no-..." flag.
          cmd->add_flag(v ? "!" + f.flag : f.flag, v, f.help);
        } else if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<std::string>>) {
          // Recorded settings without a flag; never reached (rows without a flag are skipped).
        } else {
          std::string help = f.help;
          if (f.key == "precision")
            help += ": " + amp::preset_names() +
                    " (aliases: bf16-mixed, bf16, 16-mixed, fp16, bf16-true, 16-true, 32, f32, O0-O3; "
                    "or params=..,compute=..)";
          CLI::Option* o = cmd->add_option(f.flag, v, help);
          if constexpr (std::is_same_v<T, std::string>) {
            if (f.key == "precision") o->check(precision_name());
            else if (f.key == "model") o->check(model_name(f.choices));
            else if (!f.choices.empty()) o->check(one_of(f.choices));
            if (f.key == "init_from") o->check(CLI::ExistingFile);
          } else {
            o->check(numeric_check(f, std::is_integral_v<T>, std::is_unsigned_v<T>));
          }
          if (!f.help.empty() && (f.saved || std::is_arithmetic_v<T>)) o->capture_default_str();
        }
      },
      f.member);
}

}  // namespace

void add_training_flags(CLI::App* cmd, train::TrainConfig& config) {
  for (const train::ConfigField& f : train::config_fields()) {
    if (f.flag.empty()) continue;
    add_field(cmd, f, config);
    if (f.key == "precision")
      cmd->add_flag_callback("--no-amp", [&config] { config.precision = "fp32"; },
                             "Train in fp32 (same as --precision fp32)");
  }
  cmd->add_option_function<std::string>(
         "--inject-nonfinite",
         [&config](const std::string& v) {
           // STEP[:PARAM]: fault injection, an inf in one gradient at that step.
           const auto colon = v.find(':');
           try {
             config.inject_nonfinite_step = std::stoll(v.substr(0, colon));
           } catch (...) {
             throw CLI::ValidationError("--inject-nonfinite", "expected STEP[:PARAM], got '" + v + "'");
           }
           if (config.inject_nonfinite_step < 1)
             throw CLI::ValidationError("--inject-nonfinite", "STEP must be >= 1, got '" + v + "'");
           config.inject_nonfinite_param = colon == std::string::npos ? "" : v.substr(colon + 1);
         },
         "Write inf into a gradient at STEP (of PARAM, e.g. fc1.weight), to test the loss scaler")
      ->type_name("STEP[:PARAM]");
}

}  // namespace mixprec::cli
