// model_plan.cpp: a model file's text (model_file.h) read with yaml-cpp (JSON is YAML's flow
// style, so one reader serves both and every value keeps its file:line:column) and checked
// layer by layer with the shape flowing through, into a plan: no module, no allocation, so
// that the fuzz harness and `mixprec summary` can run it on any file. This file checks the
// structure (lists, repeat and residual blocks, names, precision); each layer type's rules
// are in model_plan_layers.cpp.
#include "nn/model_plan.h"

#include "nn/model_planner.h"

#include "nn/layer_type.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "io/yaml_json.h"
#include "mixprec/core/names.h"

namespace mixprec::nn {
namespace plan_detail {

std::vector<std::string> type_names() {
  std::vector<std::string> names;
  for (const LayerType* t : layer_types()) names.push_back(t->name);
  names.push_back("repeat");
  return names;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool ends_language_model(const json& entry) {
  const LayerType* t = find_layer_type(entry_type(entry));
  return t != nullptr && t->ends_language_model;
}

bool reads_ids(const json& entry) {
  const LayerType* t = find_layer_type(entry_type(entry));
  return t != nullptr && t->reads_ids;
}

std::string entry_type(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (!entry.is_object()) return "";
  if (entry.contains("repeat")) return "repeat";
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (it.key() != "name" && it.key() != "precision") return it.key();
  return "";
}

int64_t product(const std::vector<int64_t>& s) {
  int64_t p = 1;
  for (int64_t d : s) p *= d;
  return p;
}

// A summary row: the layer as built, with what its type says about its dtypes.
ModelFileLayer row_of(const LayerType& t, const std::string& full, const std::vector<int64_t>& shape,
                      int64_t parameters, const std::string& precision, int nesting) {
  ModelFileLayer r;
  r.name = full, r.type = t.name, r.output_shape = shape, r.parameters = parameters, r.precision = precision;
  r.depth = nesting;
  r.output_op = t.output_op;
  r.normalization = t.normalization;
  r.block = t.block;
  if (t.autocast_why) r.autocast_why = t.autocast_why;
  return r;
}

// Appends the layers of the list at `pointer` to `seq`; `shape` flows through them.
Status Planner::block(const json& list, const std::string& pointer, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
             const std::string& prefix, int nesting) {
  if (!list.is_array()) return error(pointer, "expected a list of layers");
  if (nesting > kMaxNesting) return error(pointer, "residual blocks nested deeper than " + std::to_string(kMaxNesting));
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = pointer + "/" + std::to_string(i);
    const json& entry = list[i];
    if (entry.is_object() && entry.contains("repeat")) {
      MIXPREC_RETURN_IF_ERROR(repeat(entry, at, seq, shape, prefix, nesting, names));
      continue;
    }
    MIXPREC_RETURN_IF_ERROR(layer(entry, at, seq, shape, prefix, nesting, names));
  }
  return Status::ok();
}

Status Planner::repeat(const json& entry, const std::string& at, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
              const std::string& prefix, int nesting, std::set<std::string>& names) {
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (it.key() != "repeat" && it.key() != "layers")
      return error(at + "/" + it.key(), "'" + it.key() + "' in a repeat block (expected repeat: N and layers: [...])");
  const json& n = entry["repeat"];
  if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxRepeat)
    return error(at + "/repeat", "repeat: expected an integer in 1.." + std::to_string(kMaxRepeat) + ", got " +
                                     n.dump());
  if (!entry.contains("layers")) return error(at, "a repeat block needs layers: [...]");
  if (!entry["layers"].is_array()) return error(at + "/layers", "expected a list of layers");
  for (int64_t r = 0; r < n.get<int64_t>(); ++r) {
    for (size_t i = 0; i < entry["layers"].size(); ++i) {
      const json& inner = entry["layers"][i];
      if (inner.is_object() && inner.contains("name"))
        return error(at + "/layers/" + std::to_string(i) + "/name", "a repeated layer cannot have a name");
    }
    MIXPREC_RETURN_IF_ERROR(block_into(entry["layers"], at + "/layers", seq, shape, prefix, nesting, names));
  }
  return Status::ok();
}

// The entries of `list` appended to `seq` itself (a repeat's body).
Status Planner::block_into(const json& list, const std::string& pointer, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
                  const std::string& prefix, int nesting, std::set<std::string>& names) {
  if (!list.is_array()) return error(pointer, "expected a list of layers");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = pointer + "/" + std::to_string(i);
    if (list[i].is_object() && list[i].contains("repeat"))
      return error(at, "repeat blocks do not nest; repeat the outer block more times");
    MIXPREC_RETURN_IF_ERROR(layer(list[i], at, seq, shape, prefix, nesting, names));
  }
  return Status::ok();
}

Status Planner::layer(const json& entry, const std::string& at, std::vector<LayerPlan>& seq, std::vector<int64_t>& shape,
             const std::string& prefix, int nesting, std::set<std::string>& names) {
  if (++count_ > kMaxLayers) return error(at, "more than " + std::to_string(kMaxLayers) + " layers");
  std::string type, name = std::to_string(seq.size()), precision = "auto";
  json params = json::object();
  std::string params_at = at;
  if (entry.is_string()) {
    type = entry.get<std::string>();
  } else if (entry.is_object()) {
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      const std::string& k = it.key();
      if (k == "name") {
        if (!it.value().is_string()) return error(at + "/name", "name: expected text");
        name = it.value().get<std::string>();
        const bool ok = !name.empty() && name.size() <= 64 &&
                        std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
        if (!ok) return error(at + "/name", "name '" + name.substr(0, 64) + "': expected letters, digits and _");
      } else if (k == "precision") {
        if (!it.value().is_string() || (it.value() != "fp32" && it.value() != "auto"))
          return error(at + "/precision", "precision: expected fp32 (this layer runs in float32 under every "
                                          "preset) or auto, got " + it.value().dump());
        precision = it.value().get<std::string>();
      } else if (!type.empty()) {
        return error(at + "/" + k, "a layer has one type; this one has '" + type + "' and '" + k + "'");
      } else {
        type = k;
        params = it.value();
        params_at = at + "/" + k;
      }
    }
    if (type.empty()) return error(at, "no layer type (expected one of: " + list_text(type_names()) + ")");
  } else {
    return error(at, "expected a layer: a type name (relu) or type: {parameters}");
  }
  const LayerType* lt = find_layer_type(type);
  if (lt == nullptr)
    return error(entry.is_string() ? at : params_at,
                 "unknown layer type '" + type + "'" + did_you_mean(type, type_names()) + " (expected one of: " +
                     list_text(type_names()) + ")");
  if (!names.insert(name).second) return error(at, "two layers named '" + name + "' in one block");
  const std::string full = prefix.empty() ? name : prefix + "." + name;

  LayerPlan m;
  m.type = type;
  m.name = name;
  m.precision = precision;
  m.input_shape = shape;
  std::map<std::string, json> p;
  if (lt->block) {
    // A block's rows come before its body's (the summary's order); its totals after.
    MIXPREC_RETURN_IF_ERROR(fits_language_model(type, at));
    const size_t row = rows_ ? rows_->size() : 0;
    if (rows_) rows_->push_back(row_of(*lt, full, {}, 0, precision, nesting));
    MIXPREC_RETURN_IF_ERROR(lt->plan(*this, LayerArgs{p, params, params_at, at, full, nesting}, shape, m));
    if (rows_) (*rows_)[row].output_shape = shape, (*rows_)[row].parameters = m.parameters;
  } else {
    if (!params.is_null() && !params.is_object())
      return error(params_at, type + ": expected parameters as name: value, got " + params.dump().substr(0, 40));
    std::vector<std::string> allowed;
    for (const LayerParam& q : lt->params) allowed.push_back(q.name);
    if (params.is_object())
      for (auto it = params.begin(); it != params.end(); ++it) {
        const LayerParam* q = nullptr;
        for (const LayerParam& c : lt->params)
          if (it.key() == c.name) q = &c;
        if (q == nullptr)
          return error(params_at + "/" + it.key(),
                       type + " has no parameter '" + it.key() + "'" + did_you_mean(it.key(), allowed) +
                           (allowed.empty() ? " (it takes none)" : " (it takes: " + list_text(allowed) + ")"));
        p[it.key()] = it.value();
      }
    MIXPREC_RETURN_IF_ERROR(fits_language_model(type, params_at));
    if (ids_ && !lt->reads_ids)
      return error(params_at, type + ": the input is text as byte ids " + shape_text(shape) +
                                  "; a text classifier or language model starts with embedding: {dim: N}");
    if (!ids_ && lt->reads_ids)
      return error(params_at, type + " takes byte ids (--dataset csv --text-column NAME); its input here is " +
                                  shape_text(shape));
    MIXPREC_RETURN_IF_ERROR(lt->plan(*this, LayerArgs{p, params, params_at, at, full, nesting}, shape, m));
    if (rows_) rows_->push_back(row_of(*lt, full, shape, m.parameters, precision, nesting));
  }
  m.output_shape = shape;
  seq.push_back(std::move(m));
  return Status::ok();
}

// An integer parameter: given, "classes" (for out), or its default; in [lo, hi].
StatusOr<int64_t> Planner::integer(const std::map<std::string, json>& p, const char* key, const std::string& at,
                          std::optional<int64_t> fallback, int64_t lo, int64_t hi) {
  auto it = p.find(key);
  if (it == p.end()) {
    if (fallback) return *fallback;
    return error(at, std::string("needs ") + key + ": N" + (std::string(key) == "out" ? " (or classes)" : ""));
  }
  const json& v = it->second;
  if (std::string(key) == "out" && v.is_string() && v == "classes") return classes_;
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    return error(at + "/" + key, std::string(key) + ": expected an integer in " + std::to_string(lo) + ".." +
                                     std::to_string(hi) + (std::string(key) == "out" ? " or classes" : "") +
                                     ", got " + v.dump().substr(0, 40));
  return v.get<int64_t>();
}

StatusOr<double> Planner::number(const std::map<std::string, json>& p, const char* key, const std::string& at, double fallback,
                        double lo, double hi, bool hi_open) {
  auto it = p.find(key);
  if (it == p.end()) return fallback;
  const json& v = it->second;
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= lo &&
                  (hi_open ? v.get<double>() < hi : v.get<double>() <= hi);
  if (!ok)
    return error(at + "/" + key, std::string(key) + ": expected a number in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + (hi_open ? ")" : "]") + ", got " + v.dump().substr(0, 40));
  return v.get<double>();
}

StatusOr<bool> Planner::boolean(const std::map<std::string, json>& p, const char* key, const std::string& at, bool fallback) {
  auto it = p.find(key);
  if (it == p.end()) return fallback;
  if (!it->second.is_boolean()) return error(at + "/" + key, std::string(key) + ": expected true or false");
  return it->second.get<bool>();
}

// Counts a layer's parameters against the budget before the layer allocates them.
Status Planner::budget(const std::string& at, int64_t layer_parameters) {
  if (layer_parameters > max_parameters_ - parameters_)
    return error(at, "the model would pass " + std::to_string(max_parameters_) + " parameters (this layer has " +
                         std::to_string(layer_parameters) + ")");
  parameters_ += layer_parameters;
  return Status::ok();
}

Status Planner::needs_image(const std::string& type, const std::string& at, const std::vector<int64_t>& shape) {
  if (shape.size() == 3) return Status::ok();
  return error(at, type + " takes images [C, H, W]; its input here is " + shape_text(shape));
}

Status Planner::fits_language_model(const std::string& type, const std::string& at) {
  if (ended_) return error(at, type + " after lm_head: lm_head is a language model's last layer");
  if (!language_model_) {
    if (find_layer_type(type)->ends_language_model)
      return error(at, "lm_head ends a language model: it must be the file's last layer (a classifier ends in "
                       "[classes], e.g. global_avgpool then linear: {out: classes})");
    return Status::ok();
  }
  const LayerType* t = find_layer_type(type);
  if (t->per_position) return Status::ok();
  std::vector<std::string> allowed;
  for (const LayerType* c : layer_types())
    if (c->per_position) allowed.push_back(std::string(c->name) + (c->per_position_note ? c->per_position_note : ""));
  std::string listed;
  for (size_t i = 0; i < allowed.size(); ++i)
    listed += (i == 0 ? "" : i + 1 == allowed.size() ? " and " : ", ") + allowed[i];
  return error(at, type + " in a language model (a file ending in lm_head): each position may only see itself and "
                          "the ones before it, so its layers are " + listed +
                          (t->language_model_hint ? std::string("; ") + t->language_model_hint : ""));
}

std::string Planner::list_text(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Status Planner::error(const std::string& pointer, const std::string& what) {
  // The closest recorded position: the value itself, else its nearest enclosing value.
  std::string p = pointer;
  while (true) {
    auto it = positions_.find(p);
    if (it != positions_.end()) return Status::invalid_argument(it->second + ": " + what);
    if (p.empty()) break;
    p = p.substr(0, p.rfind('/'));
  }
  return Status::invalid_argument(source_ + ": " + what);
}

}  // namespace plan_detail

StatusOr<std::vector<LayerPlan>> plan_model_file(const std::string& text, const std::string& source,
                                                 int64_t channels, int64_t height, int64_t width, int64_t classes,
                                                 std::vector<ModelFileLayer>* layers, int64_t max_parameters,
                                                 bool token_input) {
  io::Positions positions;
  auto doc = io::yaml_to_json(text, source, &positions);
  if (!doc.is_ok()) return doc.status();
  if (!doc->is_object())
    return Status::invalid_argument(source + ": expected a mapping with layers: [...] (and optionally name: ...)");
  for (auto it = doc->begin(); it != doc->end(); ++it)
    if (it.key() != "layers" && it.key() != "name")
      return Status::invalid_argument((positions.count("/" + it.key()) ? positions["/" + it.key()] : source) +
                                      ": unknown key '" + it.key() + "'" +
                                      did_you_mean(it.key(), {"layers", "name"}) + " (expected layers and name)");
  if (!doc->contains("layers"))
    return Status::invalid_argument(source + ": expected a mapping with layers: [...] (and optionally name: ...)");
  const nlohmann::json& list = (*doc)["layers"];
  // A file ending in lm_head is a language model: byte ids in, the next byte's logits out.
  const bool language_model = list.is_array() && !list.empty() && plan_detail::ends_language_model(list.back());
  if (language_model && !token_input)
    return Status::invalid_argument(source + ": ends in lm_head, a language model of text: train it on "
                                    "--dataset kjv or --dataset text");
  plan_detail::Planner planner(source, positions, classes, layers, max_parameters, token_input, language_model);
  std::vector<LayerPlan> plan;
  // Per sample: [C, H, W] images, [F] table columns, or [T] byte ids.
  std::vector<int64_t> shape = token_input                  ? std::vector<int64_t>{width}
                               : height == 1 && width == 1 ? std::vector<int64_t>{channels}
                                                           : std::vector<int64_t>{channels, height, width};
  if (layers) layers->clear();
  MIXPREC_RETURN_IF_ERROR(planner.block(list, "/layers", plan, shape, "", 0));
  if (language_model) return plan;  // lm_head gave [T, 256]
  if (shape != std::vector<int64_t>{classes})
    return Status::invalid_argument(source + ": the last layer outputs " + plan_detail::shape_text(shape) + " per sample; a "
                                    "classifier of " + std::to_string(classes) + " classes must end in [" +
                                    std::to_string(classes) + "] (e.g. linear: {out: classes})");
  return plan;
}

}  // namespace mixprec::nn
