// memory_estimate.cpp: see memory_estimate.h.
#include "train/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "mixprec/core/memory.h"
#include "mixprec/nn/model_file.h"
// The plan (layer shapes without building anything) is nn's internal form of a model file;
// the estimate needs its per-layer shapes, which the public ModelFileLayer rows only get from
// a build, and a build allocates the weights this is meant to check first.
#include "nn/layer_type.h"
#include "nn/model_plan.h"
#include "train/precision_step.h"

namespace mixprec::train {

namespace {

int64_t dtype_bytes(DType d) { return d == DType::f32 ? 4 : d == DType::f64 ? 8 : 2; }

// Bytes per parameter beyond the activations: see memory_estimate.h.
int64_t bytes_per_parameter(const amp::Preset& preset, const TrainConfig& c) {
  int64_t b = 2 * dtype_bytes(preset.param_dtype);  // the weight and its gradient
  if (preset.master_weights) b += 4;
  if (preset.autocast_dtype) b += 2;  // the cached 16-bit copy of an f32 weight
  if (c.optimizer == "adam" || c.optimizer == "adamw") b += 8;
  else if (c.momentum > 0) b += 4;
  return b;
}

double elements(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t d : shape) n *= double(d);
  return n;
}

struct Walk {
  double kept = 0;     // elements held from forward until backward
  double largest = 0;  // the largest single layer's, for the gradients alive in backward
  int64_t parameters = 0;
};

void walk(const std::vector<nn::LayerPlan>& layers, Walk& w) {
  for (const nn::LayerPlan& p : layers) {
    const double out = elements(p.output_shape);
    // What the next layer keeps of it, or what backward needs: its layer type's count
    // (layer_type.h), else its output.
    const nn::LayerType* type = nn::find_layer_type(p.type);
    const double kept = type && type->kept_activations ? type->kept_activations(p) : out;
    walk(p.body, w);
    walk(p.shortcut, w);
    w.kept += kept;
    w.largest = std::max(w.largest, kept);
    if (p.body.empty() && p.shortcut.empty()) w.parameters += p.parameters;
  }
}

int64_t saturate(double v) { return v >= 9.0e18 ? int64_t(9.0e18) : int64_t(v); }

MemoryEstimate finish(MemoryEstimate e) {
  e.total_bytes = saturate(double(e.weight_bytes) + double(e.activation_bytes_per_sample) * double(e.batch));
  return e;
}

}  // namespace

std::string bytes_text(int64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

StatusOr<MemoryEstimate> estimate_model_file_memory(const nn::ModelSpec& spec, const TrainConfig& config,
                                                    const amp::Preset& preset, int64_t batch) {
  // The geometry build_model gives the file (models.cpp): a language model reads width - 1
  // byte ids.
  auto plan = spec.language_model
                  ? nn::plan_model_file(spec.file_text, spec.name, 1, 1, spec.width - 1, spec.classes, nullptr,
                                        nn::kMaxModelFileParameters, true)
                  : nn::plan_model_file(spec.file_text, spec.name, spec.channels, spec.height, spec.width,
                                        spec.classes, nullptr, nn::kMaxModelFileParameters, spec.token_input);
  if (!plan.is_ok()) return plan.status();
  Walk w;
  walk(*plan, w);
  const double input = double(spec.channels * spec.height * spec.width);
  MemoryEstimate e;
  e.parameters = w.parameters;
  e.weight_bytes = saturate(double(w.parameters) * double(bytes_per_parameter(preset, config)));
  e.activation_bytes_per_sample = saturate(4.0 * (input + w.kept + w.largest));
  e.batch = batch;
  e.method = "from the model file's layer shapes";
  return finish(e);
}

StatusOr<MemoryEstimate> measure_model_memory(const nn::ModelSpec& spec, const TrainConfig& config,
                                              const amp::Preset& preset, std::shared_ptr<const ImageDataset> train,
                                              int64_t batch) {
  const amp::Preset fp32 = amp::preset_by_name("fp32").value();
  TrainConfig c = config;
  c.clip_grad_norm = 0;
  auto model = nn::make_model(spec);
  // One fp32 step of the model on the first `n` training samples: the tracking allocator's
  // peak of activations (and kernels' workspace) over it, above what was held before. Not
  // the total: at a small batch the total peaks at the optimizer step, where the weights'
  // state dominates and the activations are already freed, so it does not grow with n.
  auto activations_of_step = [&](int64_t n) -> int64_t {
    DataLoader loader(train, DataLoaderOptions{.batch_size = n, .shuffle = false, .prefetch = 0});
    auto b = loader.next();
    if (!b) return 0;
    const MemoryStats before = memory_stats();
    reset_peak_memory();
    {
      PrecisionStep step(fp32, model, c);
      step.optimizer().set_lr(0.0);
      step.run({*b});
    }
    const MemoryStats after = memory_stats();
    int64_t bytes = 0;
    for (MemoryCategory k : {MemoryCategory::activations, MemoryCategory::workspace})
      bytes += after.peak_bytes[size_t(k)] - before.current_bytes[size_t(k)];
    return bytes;
  };
  const int64_t small = std::min<int64_t>(4, train->count);
  const int64_t a1 = activations_of_step(1), an = small > 1 ? activations_of_step(small) : a1;
  const int64_t per_sample = small > 1 ? std::max<int64_t>((an - a1) / (small - 1), 0) : a1;
  MemoryEstimate e;
  e.parameters = model->num_parameters();
  // What does not grow with the batch: the weights' share (as for a model file) and the
  // activations' fixed part (a1 beyond one sample's).
  e.weight_bytes = saturate(double(e.parameters) * double(bytes_per_parameter(preset, config))) +
                   std::max<int64_t>(a1 - per_sample, 0);
  e.activation_bytes_per_sample = per_sample;
  e.batch = batch;
  e.method = "measured: one fp32 step at batch 1 and " + std::to_string(small);
  return finish(e);
}

namespace {

std::string read_small(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "123456789\n" -> 123456789; "max\n" (no limit) and anything else -> nullopt.
std::optional<int64_t> plain_number(const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v <= 0) return std::nullopt;
  return int64_t(v);
}

std::optional<int64_t> bytes_with_suffix(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0) || !std::isfinite(v)) return std::nullopt;
  double scale = 1;
  const std::string unit(end);
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return std::nullopt;
  return saturate(v * scale);
}

}  // namespace

std::optional<MachineMemory> machine_memory_from(const std::string& meminfo, const std::string& cgroup_max,
                                                 const std::string& cgroup_current, const char* env_limit) {
  if (env_limit != nullptr && *env_limit != '\0') {
    if (std::string(env_limit) == "off") return std::nullopt;
    if (auto v = bytes_with_suffix(env_limit)) return MachineMemory{*v, "MIXPREC_MEMORY_LIMIT"};
    // A value that does not read is not a reason to skip the check: fall through.
  }
  std::optional<MachineMemory> m;
  long long kb = 0;
  if (const size_t at = meminfo.find("MemAvailable:");
      at != std::string::npos && std::sscanf(meminfo.c_str() + at, "MemAvailable: %lld kB", &kb) == 1 && kb > 0)
    m = MachineMemory{int64_t(kb) * 1024, "MemAvailable"};
  if (auto limit = plain_number(cgroup_max)) {
    const int64_t used = plain_number(cgroup_current).value_or(0);
    const int64_t left = std::max<int64_t>(*limit - used, 0);
    if (!m || left < m->available)
      m = MachineMemory{left, "cgroup limit " + bytes_text(*limit) + ", " + bytes_text(used) + " in use"};
  }
  return m;
}

std::optional<MachineMemory> machine_memory() {
  const std::string meminfo = read_small("/proc/meminfo");
  // cgroup v2 (the unified hierarchy: a container's own limit is at its root), else v1.
  std::string max = read_small("/sys/fs/cgroup/memory.max"), current = read_small("/sys/fs/cgroup/memory.current");
  if (max.empty()) {
    max = read_small("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    current = read_small("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    // v1 reports "no limit" as a huge number (2^63 rounded to pages): MemAvailable is lower.
  }
  // nullopt (no check) when turned off, or when nothing could be read.
  return machine_memory_from(meminfo, max, current, std::getenv("MIXPREC_MEMORY_LIMIT"));
}

Status check_fits_in_memory(const MemoryEstimate& e, const MachineMemory& machine) {
  if (e.total_bytes <= machine.available) return Status::ok();
  const int64_t room = machine.available - e.weight_bytes;
  const int64_t fits = e.activation_bytes_per_sample > 0 && room > 0 ? room / e.activation_bytes_per_sample : 0;
  const std::string advice =
      fits >= 1 ? "lower --batch-size to at most " + std::to_string(fits) + " (per process), or use a smaller model"
                : "even one sample does not fit: use a smaller model";
  return Status::resource_exhausted(
      "not enough memory for this run: it needs about " + bytes_text(e.total_bytes) + " (weights, gradients and "
      "optimizer state of " + std::to_string(e.parameters) + " parameters " + bytes_text(e.weight_bytes) +
      "; activations " + bytes_text(e.activation_bytes_per_sample) + " per sample x batch " +
      std::to_string(e.batch) + ", " + e.method + "), and " + bytes_text(machine.available) +
      " is available (" + machine.source + "): " + advice +
      " (MIXPREC_MEMORY_LIMIT=off skips this check; docs/cli.md, Memory)");
}

}  // namespace mixprec::train
