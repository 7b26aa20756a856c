// checkpointing.cpp: capture and restore of the whole training state (exact resume).
#include "train/checkpointing.h"

#include <sys/stat.h>

#include <map>

#include "core/random.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/train/train_config.h"

namespace mixprec::train {

std::string run_dir_of(const TrainConfig& config) {
  if (!config.run_dir.empty() || config.resume.empty()) return config.run_dir;
  struct stat sb;
  if (::stat(config.resume.c_str(), &sb) != 0) return "";
  if (S_ISDIR(sb.st_mode)) return config.resume;
  const auto slash = config.resume.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : config.resume.substr(0, slash);
}

TrainingState capture_state(PrecisionStep& step, const TrainConfig& config, const Position& pos) {
  TrainingState s;
  s.model = step.model().named_parameters();
  for (auto& b : step.model().named_buffers()) s.model.push_back(b);
  s.optimizer = step.optimizer().state_tensors();
  s.optimizer_steps = step.optimizer().step_count();
  if (auto* m = step.masters())
    for (auto& [name, t] : m->named_masters()) s.masters[name] = t;
  s.scaler = step.scaler().state_dict();
  s.rng_state = generator_state();
  s.epoch = pos.epoch;
  s.batch_in_epoch = pos.batch_in_epoch;
  s.global_step = pos.global_step;
  s.config_json = config_to_json(config);
  s.precision = step.preset().name;
  s.model_name = config.model;
  return s;
}

namespace {

Status copy_named(const std::string& file, const char* what,
                  const std::vector<std::pair<std::string, Tensor>>& into,
                  const std::map<std::string, Tensor>& from, bool require_same_dtype) {
  std::string problems;
  for (const auto& [name, dst] : into) {
    auto it = from.find(name);
    if (it == from.end()) {
      problems += "\n  missing " + std::string(what) + " '" + name + "' " + shape_str(dst.shape());
      continue;
    }
    const Tensor& src = it->second;
    if (src.shape() != dst.shape()) {
      problems += "\n  '" + name + "': shape " + shape_str(src.shape()) + ", expected " + shape_str(dst.shape());
      continue;
    }
    if (require_same_dtype && src.dtype() != dst.dtype()) {
      problems += "\n  '" + name + "': dtype " + std::string(dtype_name(src.dtype())) + ", expected " +
                  dtype_name(dst.dtype()) + " (resume with the same --precision)";
      continue;
    }
    Tensor d = dst;
    d.copy_(src);
  }
  if (!problems.empty())
    return Status::data_loss(file + ": does not fit this model:" + problems);
  return Status::ok();
}

}  // namespace

StatusOr<Position> restore_state(PrecisionStep& step, const TrainingState& st, const std::string& file) {
  NoGradGuard ng;
  MIXPREC_RETURN_IF_ERROR(check_resumable(st, file));
  if (st.precision != step.preset().name)
    return Status::invalid_argument(file + ": saved with precision '" + st.precision + "', this run uses '" +
                                    step.preset().name + "' (pass --precision " + st.precision + ")");
  std::map<std::string, Tensor> saved(st.model.begin(), st.model.end());
  auto targets = step.model().named_parameters();
  for (auto& b : step.model().named_buffers()) targets.push_back(b);
  MIXPREC_RETURN_IF_ERROR(copy_named(file, "tensor", targets, saved, true));
  if (auto* m = step.masters())
    MIXPREC_RETURN_IF_ERROR(copy_named(file, "master weight", m->named_masters(), st.masters, true));
  try {
    step.optimizer().load_state_tensors(st.optimizer);
    step.optimizer().set_step_count(st.optimizer_steps);
    if (step.scaler().is_enabled()) {
      if (st.scaler.empty())
        return Status::data_loss(file + ": no scaler state, but this preset uses loss scaling");
      step.scaler().load_state_dict(st.scaler);
    }
  } catch (const Error& e) {
    return Status::data_loss(file + ": " + e.what());
  }
  set_generator_state(st.rng_state);
  return Position{st.epoch, st.batch_in_epoch, st.global_step};
}

StatusOr<SavedCheckpoint> save_checked(const std::string& run_dir, const TrainingState& state, bool is_best) {
  SavedCheckpoint out;
  if (auto bad = find_nonfinite(state)) {
    const std::string name = nonfinite_checkpoint_filename(state.global_step);
    out.file = run_dir + "/" + name;
    MIXPREC_RETURN_IF_ERROR(save_checkpoint(out.file, state));
    out.problem = "the state at step " + std::to_string(state.global_step) + " holds inf/NaN: " + bad->describe() +
                  "; written only as the diagnostic " + out.file + " (mixprec inspect --all shows it); " +
                  "last.json keeps naming the previous finite checkpoint";
    return out;
  }
  const std::string name = checkpoint_filename(state.global_step);
  if (Status s = check_resumable(state, run_dir + "/" + name); !s.is_ok()) {
    out.problem = "the state at step " + std::to_string(state.global_step) +
                  " could not be resumed, so it is not saved: " + s.message();
    return out;
  }
  out.file = run_dir + "/" + name;
  MIXPREC_RETURN_IF_ERROR(save_checkpoint(out.file, state));
  MIXPREC_RETURN_IF_ERROR(update_pointer(run_dir, "last", name));
  if (is_best) MIXPREC_RETURN_IF_ERROR(update_pointer(run_dir, "best", name));
  out.usable = true;
  return out;
}

Status load_weights(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::string& file) {
  std::map<std::string, Tensor> saved(tensors.begin(), tensors.end());
  auto targets = model.named_parameters();
  for (auto& b : model.named_buffers()) targets.push_back(b);
  std::string unexpected;
  for (auto& [name, t] : saved) {
    bool known = false;
    for (auto& [n, _] : targets) known = known || n == name;
    if (!known && name.rfind("optimizer.", 0) != 0 && name.rfind("master.", 0) != 0)
      unexpected += " '" + name + "'";
    if (known && !is_floating(t.dtype()))
      return Status::data_loss(file + ": tensor '" + name + "' has dtype " + dtype_name(t.dtype()) +
                               ", expected a floating type");
  }
  if (!unexpected.empty())
    return Status::data_loss(file + ": tensors this model does not have:" + unexpected);
  NoGradGuard ng;
  return copy_named(file, "tensor", targets, saved, false);
}

Status load_weights(nn::Module& model, const std::string& path) {
  auto file = load_safetensors(path);
  if (!file.is_ok()) return file.status();
  return load_weights(model, file->tensors, path);
}

}  // namespace mixprec::train
