// train_config.h: the one table of TrainConfig's settings. Each row names a setting once: its
// config.json key, its command-line flag, its help, the values it accepts and whether a
// --resume may change it. Everything that handles settings walks this table: the flags of
// `mixprec train`/`compare`/`bench`, config.json and the configuration inside each checkpoint,
// validate(), and --resume's "the run's own settings, except flags given on the command line".
// Adding a setting is a member in TrainConfig (train.h) and a row in config_fields().
#pragma once
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/train/train.h"

namespace mixprec::train {

struct ConfigField {
  using Member = std::variant<std::string TrainConfig::*, int64_t TrainConfig::*, uint64_t TrainConfig::*,
                              int TrainConfig::*, double TrainConfig::*, bool TrainConfig::*,
                              std::vector<double> TrainConfig::*, std::vector<std::string> TrainConfig::*>;
  static constexpr double kNone = std::numeric_limits<double>::infinity();

  std::string key{};  // config.json key: "batch_size"
  // Its command-line flag ("--batch-size"); for a switch that is on by default, the flag that
  // turns it off ("--no-shuffle"); "" when the setting has no flag (norm_mean: recorded only).
  std::string flag{};
  Member member{};
  std::string help{};
  // Numbers: the accepted range. A bound is inclusive unless its *_open says otherwise.
  double min = -kNone, max = kNone;
  bool min_open = false, max_open = false;
  std::vector<std::string> choices{};  // text: the accepted values (empty: any text)
  bool saved = true;                 // written to config.json and every checkpoint
  // A resume continues the run as it was: a setting that shapes the model, the optimizer
  // state or the data order (model, precision, optimizer, batch size, seed, ...) cannot be
  // changed by a flag on --resume; the others (epochs, lr, threads, ...) can.
  bool fixed_on_resume = false;
};

// Every setting, in the order of `mixprec train --help` and config.json.
const std::vector<ConfigField>& config_fields();
// The row of a config.json key, or nullptr.
const ConfigField* find_config_field(std::string_view key);

// The field's value checked against its row's range and choices: "" when accepted, else
// "must be ..., got ..." (without the flag name).
std::string check_field(const ConfigField& field, const TrainConfig& config);
// The shortest text that reads back as v: 65536, 0.001, 1e-08 (not "65536.000000").
std::string number_text(double v);
// The field's value as text ("0.001", "cnn", "true", "[0.5, 0.25]"), for messages.
std::string field_text(const ConfigField& field, const TrainConfig& config);

std::string config_to_json(const TrainConfig& config);
// Whether every saved text setting is UTF-8, as config.json and each checkpoint's header
// (JSON) must hold it; config_to_json would replace the rest, and a checkpoint could not be
// saved at all. invalid_argument naming the flag (a path that is not UTF-8 names its file).
Status check_recordable(const TrainConfig& config);
// Unknown keys are ignored (newer files); a key of the wrong type is invalid_argument naming it.
StatusOr<TrainConfig> config_from_json(const std::string& text);
// `given` with every saved field taken from `saved` (a run's config.json) unless
// explicitly_given(key) says the user set it on the command line: how --resume continues
// with the run's own settings while flags still win. A flag that changes a fixed_on_resume
// setting is refused (invalid_argument naming the flag, the run's value and the given one).
StatusOr<TrainConfig> adopt_saved_config(const TrainConfig& given, const std::string& saved,
                                         const std::function<bool(const std::string& key)>& explicitly_given);
// A user's configuration file (`mixprec train --config FILE`): a JSON object with config.json's
// keys (a run's config.json is a valid one). Unlike a run's own file, every key must be a
// setting: an unknown key is invalid_argument naming the file and the key, with a
// suggestion. Values go through the same type and range checks; flags on the command line
// win (explicitly_given). For a file the user wrote (`in_user_file`), each refusal names
// FILE:line:column of the value, and values out of their row's range are refused here; for
// text a program made (an experiment's base, as JSON), messages name `file` alone and ranges
// are left to the caller, which can point into its own file.
StatusOr<TrainConfig> apply_config_file(const TrainConfig& given, const std::string& text, const std::string& file,
                                        const std::function<bool(const std::string& key)>& explicitly_given,
                                        bool in_user_file = true);

}  // namespace mixprec::train
