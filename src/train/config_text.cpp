// config_text.cpp: settings as text, walking the table of train_config.cpp: config.json in
// both directions, the resume merge (a run's own settings except flags given), and --config
// files in JSON or YAML, each value checked for its type and integer range on the way in.
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "io/json_limits.h"
#include "io/yaml_json.h"
#include "mixprec/core/names.h"
#include "mixprec/train/train_config.h"

namespace mixprec::train {

std::string config_to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const ConfigField& f : config_fields()) {
    if (!f.saved) continue;
    std::visit([&](auto member) { j[f.key] = config.*member; }, f.member);
  }
  // Every text field was checked to be UTF-8 where it was read; replace anything else rather
  // than throw while writing config.json.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status check_recordable(const TrainConfig& config) {
  for (const ConfigField& f : config_fields()) {
    if (!f.saved) continue;
    std::vector<std::string> texts;
    if (auto* s = std::get_if<std::string TrainConfig::*>(&f.member)) texts.push_back(config.**s);
    if (auto* v = std::get_if<std::vector<std::string> TrainConfig::*>(&f.member)) texts = config.**v;
    const bool path = f.flag == "--model" || f.flag == "--data-dir" || f.flag == "--run-dir" ||
                      f.flag == "--init-from" || f.flag == "--resume";
    for (const std::string& text : texts)
      if (!io::is_valid_utf8(text))
        return Status::invalid_argument(
            (f.flag.empty() ? "the run's " + f.key : f.flag) + ": " +
            nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
            " is not UTF-8 text, and a run records it in config.json and in every checkpoint (JSON, UTF-8 only): " +
            (path ? "rename the file or folder" : "write it in UTF-8") + ", or pass --run-dir none to record nothing");
  }
  return Status::ok();
}

namespace {

// Whether JSON number v fits integer type T. nlohmann's get<T>() static_casts a double, which
// is undefined behaviour out of range ("epochs": 1e300 was a fuzz crash under UBSan).
template <typename T>
bool fits(const nlohmann::json& v) {
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(L::max());
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (!L::is_signed) return i >= 0;
    return i >= int64_t(L::min()) && i <= int64_t(L::max());
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    const double bound = std::ldexp(1.0, L::digits);  // 2^63 for int64: max + 1, exactly
    return std::isfinite(d) && d == std::trunc(d) && d < bound && d >= (L::is_signed ? -bound : 0.0);
  }
  return true;  // not a number: get<T>() throws, reported as the wrong type below
}

// Overwrites the saved fields of c present in j.
Status apply_json(TrainConfig& c, const nlohmann::json& j) {
  for (const ConfigField& f : config_fields()) {
    if (!f.saved || !j.contains(f.key)) continue;
    const nlohmann::json& v = j[f.key];
    Status error = std::visit(
        [&](auto member) -> Status {
          using T = std::decay_t<decltype(c.*member)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            if (!fits<T>(v))
              return Status::invalid_argument("configuration: field '" + f.key + "' is " + v.dump().substr(0, 80) +
                                              ", expected an integer in [" +
                                              std::to_string(std::numeric_limits<T>::min()) + ", " +
                                              std::to_string(std::numeric_limits<T>::max()) + "]");
          }
          try {
            c.*member = v.get<T>();
          } catch (const nlohmann::json::exception&) {
            return Status::invalid_argument("configuration: field '" + f.key + "' has the wrong type (" +
                                            v.dump().substr(0, 80) + ")");
          }
          return Status::ok();
        },
        f.member);
    MIXPREC_RETURN_IF_ERROR(error);
  }
  return Status::ok();
}

// Deeper JSON would overflow the stack when a value is copied or printed (io/json_limits.h).
Status check_depth(const std::string& text) {
  if (io::json_depth_within(text)) return Status::ok();
  return Status::invalid_argument("configuration: JSON nested deeper than " + std::to_string(io::kMaxJsonDepth) +
                                  " levels, expected a flat object of settings");
}

StatusOr<nlohmann::json> parse_object(const std::string& text) {
  MIXPREC_RETURN_IF_ERROR(check_depth(text));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::invalid_argument("configuration: not a JSON object");
  return j;
}

}  // namespace

StatusOr<TrainConfig> config_from_json(const std::string& text) {
  auto j = parse_object(text);
  if (!j.is_ok()) return j.status();
  TrainConfig c;
  MIXPREC_RETURN_IF_ERROR(apply_json(c, *j));
  return c;
}

StatusOr<TrainConfig> adopt_saved_config(const TrainConfig& given, const std::string& saved,
                                         const std::function<bool(const std::string& key)>& explicitly_given) {
  auto j = parse_object(saved);
  if (!j.is_ok()) return j.status();
  TrainConfig as_saved = given;
  MIXPREC_RETURN_IF_ERROR(apply_json(as_saved, *j));
  nlohmann::json keep = nlohmann::json::object();
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (!explicitly_given(it.key())) {
      keep[it.key()] = it.value();
      continue;
    }
    const ConfigField* f = find_config_field(it.key());
    if (f == nullptr || !f->fixed_on_resume) continue;
    const std::string was = field_text(*f, as_saved), now = field_text(*f, given);
    if (was != now)
      return Status::invalid_argument(f->flag + ": cannot change on --resume: the run was trained with '" + was +
                                      "', given '" + now + "' (a resume continues the run as it was; to change "
                                      "it, start a new run from its weights with --init-from CHECKPOINT)");
  }
  TrainConfig c = given;
  MIXPREC_RETURN_IF_ERROR(apply_json(c, keep));
  return c;
}

// A --config file's settings: JSON, or YAML for a .yaml/.yml file (converted to the JSON it
// denotes, then checked exactly as JSON is).
static StatusOr<nlohmann::json> config_file_object(const std::string& text, const std::string& file,
                                                   io::Positions* positions) {
  const auto ends_with = [&](const std::string& suffix) {
    return file.size() >= suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (!ends_with(".yaml") && !ends_with(".yml")) {
    auto j = parse_object(text);
    if (!j.is_ok()) return Status::invalid_argument(file + ": " + j.status().message());
    // JSON is YAML's flow style: read again for the positions of the values (the checks above
    // and the errors of a JSON file stay JSON's own).
    if (auto located = io::yaml_to_json(text, file, positions); !located.is_ok()) positions->clear();
    return j;
  }
  auto j = io::yaml_to_json(text, file, positions);
  if (!j.is_ok()) return j.status();
  if (!j->is_object())
    return Status::invalid_argument(file + ": expected a mapping of settings (key: value lines), got " +
                                    std::string(j->type_name()));
  return j;
}

StatusOr<TrainConfig> apply_config_file(const TrainConfig& given, const std::string& text, const std::string& file,
                                        const std::function<bool(const std::string& key)>& explicitly_given,
                                        bool in_user_file) {
  io::Positions positions;
  auto j = config_file_object(text, file, &positions);
  if (!in_user_file) positions.clear();
  if (!j.is_ok()) return j.status();
  // "run.yaml:3:5" where the file gives the key's value, else "run.yaml".
  auto where = [&](const std::string& key) {
    const auto it = positions.find("/" + key);
    return it == positions.end() ? file : it->second;
  };
  std::vector<std::string> keys;
  for (const ConfigField& f : config_fields())
    if (f.saved) keys.push_back(f.key);
  nlohmann::json keep = nlohmann::json::object();
  for (auto it = j->begin(); it != j->end(); ++it) {
    const ConfigField* f = find_config_field(it.key());
    if (f == nullptr || !f->saved)
      return Status::invalid_argument(where(it.key()) + ": '" + it.key() + "' is not a setting a configuration file holds" +
                                      did_you_mean(it.key(), keys) + " (the keys are config.json's: a flag's name " +
                                      "with _ for -, as `mixprec train --help` lists them)");
    if (!explicitly_given(it.key())) keep[it.key()] = it.value();
  }
  TrainConfig c = given;
  for (auto it = keep.begin(); it != keep.end(); ++it) {
    // One key at a time, so that a wrong type or a value out of range names its line.
    TrainConfig one = c;
    if (Status s = apply_json(one, nlohmann::json{{it.key(), it.value()}}); !s.is_ok())
      return Status::invalid_argument(where(it.key()) + ": " + s.message());
    if (std::string why = check_field(*find_config_field(it.key()), one); in_user_file && !why.empty())
      return Status::invalid_argument(where(it.key()) + ": " + it.key() + ": " + why);
    c = std::move(one);
  }
  return c;
}

}  // namespace mixprec::train
