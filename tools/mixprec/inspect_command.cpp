// inspect_command.cpp: `mixprec inspect C`, the precision debugger. For each tensor of a
// checkpoint: dtype, shape, range, mean |x|, and how much of it float16 could not hold
// (flushed to 0, kept only as a subnormal, overflowed to inf: the classes of
// mixprec/core/f16_range.h, which train's underflow telemetry counts too), plus NaN / inf counts,
// then the GradScaler state and the resume counters.
#include <cmath>
#include <cstdio>
#include <limits>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/core/f16_range.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/infer/infer.h"

namespace mixprec::cli {

namespace {

struct F16Stats {
  int64_t numel = 0, finite = 0, nan = 0, inf = 0;
  int64_t underflow = 0, subnormal = 0, overflow = 0;
  double min = 0, max = 0, mean_abs = 0;
};

F16Stats f16_stats(const Tensor& t) {
  F16Stats s;
  s.numel = t.numel();
  s.min = std::numeric_limits<double>::infinity();
  s.max = -std::numeric_limits<double>::infinity();
  double abs_sum = 0;
  for (double x : t.to_vector_f64()) {
    switch (f16_range(x)) {
      case F16Range::nonfinite: ++(std::isnan(x) ? s.nan : s.inf); continue;
      case F16Range::flushed: ++s.underflow; break;
      case F16Range::subnormal: ++s.subnormal; break;
      case F16Range::overflow: ++s.overflow; break;
      case F16Range::zero:
      case F16Range::normal: break;
    }
    ++s.finite;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    abs_sum += std::fabs(x);
  }
  s.mean_abs = s.finite ? abs_sum / double(s.finite) : 0.0;
  if (!s.finite) s.min = s.max = std::numeric_limits<double>::quiet_NaN();
  return s;
}

std::string pct(int64_t count, int64_t total) {
  if (count == 0) return "0";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g%% (%lld)", 100.0 * double(count) / double(total), (long long)count);
  return buf;
}

void print_header() {
  std::printf("%-28s %-5s %-18s %12s %12s %11s %16s %16s %16s %6s %6s\n", "tensor", "dtype", "shape",
              "min", "max", "mean|x|", "f16 underflow", "f16 subnormal", "f16 overflow", "nan", "inf");
}

F16Stats print_row(const std::string& name, const Tensor& t) {
  const F16Stats s = f16_stats(t);
  std::printf("%-28s %-5s %-18s %12.4g %12.4g %11.4g %16s %16s %16s %6lld %6lld\n", name.c_str(),
              safetensors_dtype_name(t.dtype()), shape_str(t.shape()).c_str(), s.min, s.max, s.mean_abs,
              pct(s.underflow, s.numel).c_str(), pct(s.subnormal, s.numel).c_str(),
              pct(s.overflow, s.numel).c_str(), (long long)s.nan, (long long)s.inf);
  return s;
}

int run_inspect(const std::string& given, bool all) {
  auto opened = infer::open_weights(given);
  if (!opened.is_ok()) {
    std::fprintf(stderr, "mixprec: checkpoint error: %s\n", opened.status().message().c_str());
    return opened.status().code() == StatusCode::io_error ? kExitRuntime : kExitCheckpoint;
  }
  const TrainingState& st = opened->state;
  const std::string* path = &opened->path;
  if (opened->weights_only) {
    std::printf("weights %s\n", path->c_str());
    std::printf("a plain safetensors file (weights only: no optimizer, scaler or training position); %s\n\n",
                opened->model_note.c_str());
  } else {
    std::printf("checkpoint %s\n", path->c_str());
    std::printf("model %s | precision %s | global step %lld | epoch %lld, batch %lld | optimizer steps %lld\n\n",
                st.model_name.c_str(), st.precision.c_str(), (long long)st.global_step, (long long)st.epoch,
                (long long)st.batch_in_epoch, (long long)st.optimizer_steps);
  }
  std::printf("checksums: %s\n\n",
              st.checksums == "verified"   ? "verified (XXH3-64 of every tensor and of the metadata)"
              : st.checksums == "absent"   ? "none in the file (written by another tool or an older mixprec): not verified"
                                           : "not checked (--no-verify-checksums)");
  print_header();
  int64_t total = 0, underflow = 0, overflow = 0, nonfinite = 0;
  for (const auto& [name, t] : st.model) {
    const F16Stats s = print_row(name, t);
    if (!is_floating(t.dtype())) continue;
    total += s.numel;
    underflow += s.underflow;
    overflow += s.overflow;
    nonfinite += s.nan + s.inf;
  }
  if (all) {
    for (const auto& [name, t] : st.masters) print_row("master." + name, t);
    for (const auto& [name, t] : st.optimizer) print_row("optimizer." + name, t);
  } else if (!st.masters.empty() || !st.optimizer.empty()) {
    std::printf("(%zu master and %zu optimizer tensors not shown; --all lists them)\n", st.masters.size(),
                st.optimizer.size());
  }
  std::printf("\nmodel: %lld values, f16 underflow %s, f16 overflow %s, non-finite %lld\n", (long long)total,
              pct(underflow, total).c_str(), pct(overflow, total).c_str(), (long long)nonfinite);
  if (opened->weights_only) {
    std::printf("scaler: none (a weights-only file)\n");
  } else if (st.scaler.empty()) {
    std::printf("scaler: none (the preset does not scale the loss)\n");
  } else {
    std::printf("scaler:");
    for (const auto& [k, v] : st.scaler) std::printf(" %s=%.10g", k.c_str(), v);
    std::printf("\n");
  }
  return kExitOk;
}

}  // namespace

Runner add_inspect_command(CLI::App& app) {
  auto checkpoint = std::make_shared<std::string>();
  auto flag = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a checkpoint's tensors with their range and what float16 would lose (precision debugger)");
  add_checkpoint_argument(cmd, *checkpoint, *flag,
                          "A .safetensors checkpoint, a run directory (its last checkpoint) or a plain "
                          "safetensors file of weights (e.g. from PyTorch)");
  cmd->add_flag("--all", *all, "Also list master weights and optimizer state");
  return [checkpoint, flag, all]() -> int {
    auto which = chosen_checkpoint(*checkpoint, *flag);
    if (!which) return kExitUsage;
    return run_inspect(*which, *all);
  };
}

}  // namespace mixprec::cli
