// checkpoint.h: training checkpoints as one standard safetensors file, so that
// `safetensors.torch.load_file(path)` hands a PyTorch user the model's state_dict directly.
//
// Layout of the file:
//   "conv1.weight", ...        model parameters and buffers under their plain names
//   "optimizer.<key>"          Optimizer::state_tensors() ("optimizer.exp_avg.0", ...)
//   "master.<name>"            O2 f32 master weights by parameter name
//   __metadata__ (string -> string):
//     format "mixprec-checkpoint", version "1", model_name, precision,
//     model_tensors (JSON array: the model's names in named_parameters() order),
//     scaler (JSON object, PyTorch's GradScaler keys + ours), rng_state,
//     optimizer_steps, epoch, batch_in_epoch, global_step (decimal integers), config (JSON).
//
// Writes are atomic (temp file, fsync, rename, fsync of the directory): a reader sees the old
// file or the new one, never a mix. A run directory's "last"/"best" pointers only ever name
// a checkpoint that is complete on disk. See docs/checkpoints.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/status.h"
#include "mixprec/tensor.h"

namespace mixprec {

inline constexpr const char* kCheckpointFormat = "mixprec-checkpoint";
inline constexpr const char* kCheckpointVersion = "1";

// Everything a resume needs to continue bit-exactly.
struct TrainingState {
  std::vector<std::pair<std::string, Tensor>> model;  // named_parameters() + named_buffers()
  std::map<std::string, Tensor> optimizer;            // Optimizer::state_tensors()
  int64_t optimizer_steps = 0;                        // Optimizer::step_count()
  std::map<std::string, Tensor> masters;              // O2 master weights (may be empty)
  std::map<std::string, double> scaler;               // GradScaler::state_dict() (may be empty)
  std::string rng_state;                              // generator_state()
  int64_t epoch = 0, batch_in_epoch = 0, global_step = 0;  // where to resume
  std::string config_json;                            // the run's configuration ("" = {})
  std::string precision, model_name;
};

// Atomic. Errors: invalid_argument (undefined tensor, duplicate name, a model name that
// starts with "optimizer." / "master.", negative counter, config_json not JSON),
// io_error naming the path.
Status save_checkpoint(const std::string& path, const TrainingState& state);

// Validates the safetensors layout (truncation, trailing bytes, offsets), then the format,
// version, every required metadata key and its type, and that the counters are
// non-negative. Errors: not_found (no such file), data_loss naming the file and the field.
StatusOr<TrainingState> load_checkpoint(const std::string& path);

// Same, on bytes in memory (tests, fuzzing); `name` stands for the file in messages.
StatusOr<TrainingState> parse_checkpoint(const uint8_t* data, size_t size, const std::string& name);

// Points run_dir/<which>.json ({"checkpoint": "<filename>"}) at a checkpoint inside run_dir,
// atomically. `which` is "last" or "best"; checkpoint_filename is relative to run_dir (no
// "..", not absolute). Refuses (not_found / data_loss) unless that file exists and is a
// complete safetensors file (its header length and size agree), so a pointer never names a
// partial file.
Status update_pointer(const std::string& run_dir, const std::string& which,
                      const std::string& checkpoint_filename);

// A checkpoint file as given, or for a run directory the file its "last" pointer names
// (falling back to <dir>/last.safetensors). not_found / data_loss naming what is missing.
StatusOr<std::string> resolve_checkpoint(const std::string& path_or_run_dir);

// "step-00000042.safetensors": zero-padded so names sort by step.
std::string checkpoint_filename(int64_t global_step);

}  // namespace mixprec
