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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

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
  // Set on load: the file's checksums were "verified", "absent" (a file written without them:
  // not verified) or "not checked" (set_verify_checksums(false)). Not saved: a save writes
  // fresh checksums.
  std::string checksums;
};

// Atomic. Errors: invalid_argument (undefined tensor, duplicate name, a model name that
// starts with "optimizer." / "master.", negative counter, config_json not JSON),
// io_error naming the path.
Status save_checkpoint(const std::string& path, const TrainingState& state);

// Whether save_checkpoint can encode state's header: every metadata string and tensor name is
// UTF-8 (the safetensors header is JSON). A run calls it before its first step, so that a
// name it cannot record (a model file path that is not UTF-8) is refused at once instead of at
// the first checkpoint, after the work. invalid_argument naming the metadata key or tensor.
Status check_checkpoint_encodable(const TrainingState& state);

// Validates the safetensors layout (truncation, trailing bytes, offsets), then the format,
// version, every required metadata key and its type, and that the counters are
// non-negative. Errors: not_found (no such file), data_loss naming the file and the field.
StatusOr<TrainingState> load_checkpoint(const std::string& path);

// Same, on bytes in memory (tests, fuzzing); `name` stands for the file in messages.
StatusOr<TrainingState> parse_checkpoint(const uint8_t* data, size_t size, const std::string& name);

// Points run_dir/<which>.json ({"checkpoint": "<filename>"}) at a checkpoint inside run_dir,
// atomically. `which` is "last" or "best"; checkpoint_filename is relative to run_dir (no
// "..", not absolute). Refuses (not_found / data_loss) unless that file exists and is a
// complete, valid checkpoint, so a pointer never names a partial file; and refuses
// (bad_checkpoint) one that holds inf/NaN or fails check_resumable, so a pointer never names
// a state a resume or rollback must not continue from.
Status update_pointer(const std::string& run_dir, const std::string& which,
                      const std::string& checkpoint_filename);

// The checkpoint run_dir/<which>.json names (its path), checked: not_found when there is no
// pointer or its target is gone, data_loss for a malformed pointer.
StatusOr<std::string> read_pointer(const std::string& run_dir, const std::string& which);

// Deletes a run directory's older checkpoints, keeping the newest `keep` (none deleted for
// keep < 1) and, whatever their age, the ones last.json and best.json name. Returns the files
// removed. Diagnostic files (nonfinite-step-*) are not checkpoints and stay.
StatusOr<std::vector<std::string>> prune_checkpoints(const std::string& run_dir, int64_t keep);

// A checkpoint file as given, or for a run directory the file its "last" pointer names
// (falling back to <dir>/last.safetensors). not_found / data_loss naming what is missing.
StatusOr<std::string> resolve_checkpoint(const std::string& path_or_run_dir);

// What a resume or rollback continues from: the first usable checkpoint among candidates
// (one that loads, passes check_resumable and holds no inf/NaN), its state, and one line per
// candidate passed over saying why ("<file>: holds inf/NaN: tensor 'fc1.weight' ...").
struct UsableCheckpoint {
  std::string file;
  TrainingState state;
  std::vector<std::string> skipped;
};
// Tries `files` in order. bad_checkpoint listing every candidate's problem when none is usable.
StatusOr<UsableCheckpoint> first_usable_checkpoint(const std::vector<std::string>& files);
// For a file: that file, refused (bad_checkpoint naming the problem) unless usable. For a run
// directory: the target of last.json (resolve_checkpoint), and when that one is not usable,
// the newest usable older checkpoint of the directory (list_checkpoints), naming what was
// passed over in `skipped`. Errors from resolve_checkpoint pass through unchanged.
StatusOr<UsableCheckpoint> resolve_usable_checkpoint(const std::string& path_or_run_dir);

// "step-00000042.safetensors": zero-padded so names sort by step.
std::string checkpoint_filename(int64_t global_step);

// "nonfinite-step-00000042.safetensors": a state that holds inf/NaN, kept only to be looked
// at (mixprec inspect). Its name does not match checkpoint_filename's pattern, so neither
// list_checkpoints, nor a pointer, nor a resume or rollback ever picks it.
std::string nonfinite_checkpoint_filename(int64_t global_step);

// The checkpoints of a run directory (files named exactly like checkpoint_filename), newest
// (highest step) first. Diagnostic and temp files are not listed. io_error if unreadable.
StatusOr<std::vector<std::pair<int64_t, std::string>>> list_checkpoints(const std::string& run_dir);

// Where a state holds inf/NaN. Model tensors are scanned first (in order), then masters,
// then optimizer state; names are as in the file ("conv1.weight", "master.fc1.weight",
// "optimizer.exp_avg_sq.0"). Only floating tensors are scanned.
struct NonFiniteReport {
  std::string first_tensor;   // the first tensor holding one
  int64_t first_index = -1;   // flat index of its first inf/NaN
  double first_value = 0.0;   // that value (NaN, inf or -inf)
  int64_t first_count = 0;    // inf/NaN elements in that tensor
  int64_t tensors = 0;        // tensors holding any
  int64_t values = 0;         // inf/NaN elements in all
  // "tensor 'conv1.weight' holds 1 inf/NaN value (first: nan at flat index 5); 3 tensors, 7 values in all"
  std::string describe() const;
};
// Empty when every floating tensor of model, masters and optimizer state is finite. A
// vectorised bit test per element, split over the OpenMP threads for large tensors.
std::optional<NonFiniteReport> find_nonfinite(const TrainingState& state);

// What a resume or rollback needs beyond a well-formed file, checked in one pass with one
// line per problem ("<file>: metadata key 'scaler', entry 'scale': ..."):
//  - scaler (when not empty): scale finite and in (0, 3.4028235e38] (it is a float32);
//    growth_factor > 1 and backoff_factor in (0, 1), both finite; growth_interval an integer
//    in [1, 2^53]; _growth_tracker an integer in [0, growth_interval); _hysteresis_tracker an
//    integer in [1, 2^53]; applied_steps / skipped_steps integers in [0, 2^53];
//  - counters: each <= 2^53, and optimizer_steps <= global_step (one optimizer step per
//    training step at most);
//  - rng_state: parses as the generator's state (std::mt19937_64's text form).
// data_loss naming the file; ok when resumable. Tensor finiteness is find_nonfinite's job.
Status check_resumable(const TrainingState& state, const std::string& file);

}  // namespace mixprec
