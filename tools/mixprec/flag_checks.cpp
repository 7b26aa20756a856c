// flag_checks.cpp: flag-value helpers shared by the subcommands: comma lists and numeric
// bounds whose messages say what is expected in words ("must be >= 1, got 0").
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "mixprec/core/hardware.h"

namespace mixprec::cli {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

CLI::Validator integer_in(int64_t min, int64_t max) {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        int64_t v = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, v);
        if (ec == std::errc::result_out_of_range) return "expected an integer in " + range + ", got " + value + " (out of range)";
        if (ec != std::errc() || ptr != end) return "expected an integer in " + range + ", got '" + value + "'";
        return v >= min && v <= max ? std::string() : "expected an integer in " + range + ", got " + value;
      },
      "INT in " + range);
}

CLI::Validator integer_from(int64_t min) {
  const std::string range = "an integer >= " + std::to_string(min);
  return CLI::Validator(
      [min, range](std::string& value) -> std::string {
        int64_t v = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, v);
        if (ec == std::errc::result_out_of_range) return "expected " + range + ", got " + value + " (out of range)";
        if (ec != std::errc() || ptr != end) return "expected " + range + ", got '" + value + "'";
        return v >= min ? std::string() : "expected " + range + ", got " + value;
      },
      "INT>=" + std::to_string(min));
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        uint64_t v = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, v);  // no sign accepted
        if (ec != std::errc() || ptr != end || value.empty())
          return "expected an integer from 0 to 18446744073709551615, got '" + value + "'";
        return std::string();
      },
      "UINT");
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

void add_threads_option(CLI::App* cmd, int& threads) {
  cmd->add_option("--threads", threads,
                  "Threads (0: OMP_NUM_THREADS if set, else the cores other processes leave free, within the cgroup "
                  "CPU quota; at most " + std::to_string(max_thread_count()) +
                      "). On a machine other processes keep busy, fewer threads than cores can be much faster "
                      "(docs/cli.md)")
      ->check(integer_in(0, max_thread_count()))
      ->capture_default_str();
}

ThreadPolicy& thread_policy(int threads) {
  static ThreadPolicy policy(threads);  // one command per process
  // An explicit count wins over the cgroup's CPU quota; said once, before any work.
  static const bool warned = [] {
    const std::string w = policy.quota_warning();
    if (!w.empty()) std::fprintf(stderr, "mixprec: warning: %s\n", w.c_str());
    return !w.empty();
  }();
  (void)warned;
  return policy;
}

void use_threads(int threads) { thread_policy(threads).settle(); }

std::string adaptive_threads_note(int threads, bool only_if_fewer) {
  const ThreadPolicy& p = thread_policy(threads);
  // "Fewer" than the policy could use: in a container whose quota allows 1 of 2 cores, 1
  // thread is the normal case, not news.
  if (!p.adaptive() || (only_if_fewer && p.threads() >= p.available())) return std::string();
  return "threads: " + p.describe();
}

}  // namespace mixprec::cli
