// memory_estimate.h: how much memory a training run will need, estimated before it allocates
// its batches, and how much the machine has; a run that cannot fit is refused up front
// (resource_exhausted, the CLI's exit code 8) instead of being OOM-killed or dying on a bare
// std::bad_alloc halfway through its first step. docs/cli.md ("Memory") says how.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/data/data.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/status.h"
#include "mixprec/train/train_config.h"

namespace mixprec::train {

struct MemoryEstimate {
  int64_t parameters = 0;
  // Weights, gradients, optimizer state, f32 masters (O2) and 16-bit copies (autocast).
  int64_t weight_bytes = 0;
  // Activations of forward and backward for one sample, in f32 (what fp32 and the AMP
  // self-check's fp32 step use; a 16-bit preset's own steps keep most of them in half).
  int64_t activation_bytes_per_sample = 0;
  int64_t batch = 0;  // samples per forward/backward in this process
  int64_t total_bytes = 0;  // weight_bytes + activation_bytes_per_sample x batch
  std::string method;  // how the activations were found, for messages
};

// From a model file's plan (model_plan.h): nothing is allocated. Activations per sample:
// 4 bytes x (the input, plus every layer's output and what it keeps for backward (a dropout
// mask, a norm's normalised input, attention's projections, scores and probabilities), plus
// the largest of those again for the gradients alive during backward). Weights per parameter:
// the parameter and its gradient in the preset's weight dtype, f32 masters (O2), a 16-bit
// copy (autocast), and the optimizer's state (Adam: 2 x f32, SGD with momentum: 1 x f32).
StatusOr<MemoryEstimate> estimate_model_file_memory(const nn::ModelSpec& spec, const TrainConfig& config,
                                                    const amp::Preset& preset, int64_t batch);

// A built-in or the caller's own model: the activations (and kernel workspace) of one fp32
// training step measured by the tracking allocator at batch 1 and at batch 4 (small, whatever
// the run's batch), the difference per sample extrapolated to `batch`:
// activations = a(1) + (batch - 1) x (a(4) - a(1)) / 3; the weights' share as for a file.
StatusOr<MemoryEstimate> measure_model_memory(const nn::ModelSpec& spec, const TrainConfig& config,
                                              const amp::Preset& preset, std::shared_ptr<const ImageDataset> train,
                                              int64_t batch);

// The memory this process may still take: /proc/meminfo's MemAvailable, or less when its
// cgroup (v2 memory.max - memory.current, or v1 limit_in_bytes - usage_in_bytes) allows less.
// MIXPREC_MEMORY_LIMIT (bytes, or with K/M/G/T: "8G") replaces it; "off" turns the check off
// (nullopt).
struct MachineMemory {
  int64_t available = 0;
  std::string source;  // "MemAvailable", "cgroup memory.max 4.0 GiB, 1.2 GiB in use", ...
};
std::optional<MachineMemory> machine_memory();
// The same from the files' texts ("" when absent), for tests.
std::optional<MachineMemory> machine_memory_from(const std::string& meminfo, const std::string& cgroup_max,
                                                 const std::string& cgroup_current, const char* env_limit);

// resource_exhausted when the estimate exceeds what is available: the message gives both, the
// parts of the estimate and the largest --batch-size that would fit.
Status check_fits_in_memory(const MemoryEstimate& estimate, const MachineMemory& machine);

std::string bytes_text(int64_t bytes);  // "26.3 GiB"

}  // namespace mixprec::train
