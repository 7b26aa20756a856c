// config_json.h: TrainConfig <-> JSON (config.json of a run, and checkpoint metadata).
// Keys are the field names (model, dataset, precision, lr, ...).
#pragma once
#include <string>

#include "mixprec/status.h"
#include "mixprec/train.h"

namespace mixprec::train {

std::string config_to_json(const TrainConfig& config);
// Unknown keys are ignored (newer files); a key of the wrong type is invalid_argument.
StatusOr<TrainConfig> config_from_json(const std::string& text);

}  // namespace mixprec::train
