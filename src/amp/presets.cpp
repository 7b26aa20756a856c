// presets.cpp: the named precision presets and the jmp-style policy strings.
#include <sstream>

#include "mixprec/amp/precision.h"

namespace mixprec::amp {

const std::vector<Preset>& all_presets() {
  static const std::vector<Preset> kPresets = {
      {"fp32", "O0", std::nullopt, DType::f32, DType::f32, false, false, false,
       "everything in f32: the accuracy reference"},
      {"amp-bf16", "O1", DType::bf16, DType::f32, DType::bf16, false, false, false,
       "autocast bf16, f32 weights, no loss scaling (bf16 has f32's range): the CPU default"},
      {"amp-fp16", "O1", DType::f16, DType::f32, DType::f16, false, true, false,
       "autocast f16, f32 weights, dynamic loss scaling"},
      {"o2-bf16", "O2", std::nullopt, DType::bf16, DType::bf16, true, false, true,
       "bf16 weights and activations, f32 master weights, norms in f32"},
      {"o2-fp16", "O2", std::nullopt, DType::f16, DType::f16, true, true, true,
       "f16 weights and activations, f32 master weights, norms in f32, loss scaling"},
      {"pure-bf16", "O3", std::nullopt, DType::bf16, DType::bf16, false, false, false,
       "everything bf16, no masters, no scaling: the baseline that shows why masters exist"},
      {"pure-fp16", "O3", std::nullopt, DType::f16, DType::f16, false, false, false,
       "everything f16, no masters, no scaling: gradients underflow, updates vanish"},
  };
  return kPresets;
}

std::string preset_names() {
  std::string s;
  for (const auto& p : all_presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

namespace {

// "params=float32,compute=bfloat16,output=float32" (jmp.get_policy's syntax; "p=", "c=",
// "o=" abbreviations too). Output is always f32 here: losses are computed in f32.
StatusOr<Preset> parse_policy_string(const std::string& text) {
  std::optional<DType> params, compute;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      return Status::invalid_argument("precision policy '" + text + "': '" + item + "' is not key=dtype");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto dt = parse_dtype(value);
    if (!dt || !is_floating(*dt) || *dt == DType::f64)
      return Status::invalid_argument("precision policy '" + text + "': '" + value +
                                      "' is not one of float32, bfloat16, float16");
    if (key == "params" || key == "p") params = dt;
    else if (key == "compute" || key == "c") compute = dt;
    else if (key == "output" || key == "o") {
      if (*dt != DType::f32)
        return Status::invalid_argument("precision policy '" + text + "': output must be float32");
    } else {
      return Status::invalid_argument("precision policy '" + text + "': unknown key '" + key +
                                      "' (expected params, compute, output)");
    }
  }
  const DType p = params.value_or(DType::f32), c = compute.value_or(p);
  for (const auto& preset : all_presets()) {
    if (preset.param_dtype != p || preset.compute_dtype != c) continue;
    // params f32 + compute 16-bit is O1; params 16-bit is O2 (with masters) by default.
    if (p == DType::f32 || preset.master_weights) return preset;
  }
  return Status::invalid_argument("precision policy '" + text +
                                  "': params must be float32 or equal to compute");
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& preset_aliases() {
  // Lightning's Trainer(precision=...): "*-mixed" is autocast with f32 weights, "*-true"
  // casts the whole model (no autocast, no masters: our pure-*); "16"/"bf16" are its older
  // spellings of the mixed ones. Accelerate's mixed_precision="bf16"/"fp16" is autocast too.
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"O0", "fp32"},          {"O1", "amp-bf16"},      {"O2", "o2-bf16"},        {"O3", "pure-bf16"},
      {"no-amp", "fp32"},      {"32", "fp32"},          {"32-true", "fp32"},      {"f32", "fp32"},
      {"float32", "fp32"},     {"bf16-mixed", "amp-bf16"}, {"bf16", "amp-bf16"},  {"16-mixed", "amp-fp16"},
      {"16", "amp-fp16"},      {"fp16", "amp-fp16"},    {"bf16-true", "pure-bf16"}, {"16-true", "pure-fp16"},
  };
  return kAliases;
}

StatusOr<Preset> preset_by_name(const std::string& name) {
  for (const auto& p : all_presets())
    if (p.name == name) return p;
  for (const auto& [alias, target] : preset_aliases())
    if (alias == name)
      for (const auto& p : all_presets())
        if (p.name == target) return p;
  if (name.find('=') != std::string::npos) return parse_policy_string(name);
  return Status::invalid_argument("unknown precision '" + name + "' (expected one of: " +
                                  preset_names() + "; an alias such as bf16-mixed, 16-mixed, "
                                  "bf16-true, 32 or O0-O3; or params=...,compute=...)");
}

}  // namespace mixprec::amp
