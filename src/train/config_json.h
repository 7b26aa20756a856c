// config_json.h: TrainConfig <-> JSON (config.json of a run, and checkpoint metadata).
// Keys are the field names (model, dataset, precision, lr, ...).
#pragma once
#include <functional>
#include <string>

#include "mixprec/status.h"
#include "mixprec/train.h"

namespace mixprec::train {

std::string config_to_json(const TrainConfig& config);
// Unknown keys are ignored (newer files); a key of the wrong type is invalid_argument.
StatusOr<TrainConfig> config_from_json(const std::string& text);
// `given` with every serialised field taken from `saved` (a config.json) unless
// explicitly_given(key) says the user set it: how --resume continues with the run's own
// settings while flags on the command line still win.
StatusOr<TrainConfig> adopt_saved_config(const TrainConfig& given, const std::string& saved,
                                         const std::function<bool(const std::string& key)>& explicitly_given);

}  // namespace mixprec::train
