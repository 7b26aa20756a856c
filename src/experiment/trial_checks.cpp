// trial_checks.cpp: check_trial_settings (sweep.h): what `mixprec train` would refuse of the
// base and of each hyperparameter's values, found before any trial starts. The experiment
// file's parser checks each setting against its own row; validate() adds what needs the rest
// of the library (precision presets, model names, this machine's thread limit), so a typo
// such as `precision: amp-bf17` is a usage error at once, not every trial failing in turn.
#include "mixprec/experiment/sweep.h"
#include "mixprec/train/train.h"
#include "mixprec/train/train_config.h"

namespace mixprec::experiment {

Status check_trial_settings(const ExperimentSpec& spec) {
  auto check = [&](const Assignment& values, const std::string& where) -> Status {
    auto text = trial_config_json(spec, values);
    if (!text.is_ok()) return text.status();
    auto config = train::apply_config_file(train::TrainConfig{}, *text, where, [](const std::string&) { return false; });
    if (!config.is_ok()) return config.status();
    config->run_dir = "trial";  // each trial has one (checks such as --save-every need it)
    if (Status s = train::validate(*config); !s.is_ok()) return Status::invalid_argument(where + ": " + s.message());
    return Status::ok();
  };
  MIXPREC_RETURN_IF_ERROR(check({}, spec.source + ": base"));
  for (const Hyperparameter& h : spec.hyperparameters) {
    std::vector<std::string> values = h.values;
    if (h.kind != Hyperparameter::Kind::constant && h.kind != Hyperparameter::Kind::categorical)
      values = grid_values(Hyperparameter{h.name, h.kind, {}, h.min, h.max, 2, h.where});  // the two ends
    for (const std::string& v : values)
      MIXPREC_RETURN_IF_ERROR(check({{h.name, v}}, h.where + ": hyperparameters." + h.name + " = " + v));
  }
  return Status::ok();
}

}  // namespace mixprec::experiment
