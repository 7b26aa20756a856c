// summary_command.cpp: `mixprec summary --model X --precision P`: a network's layers, the
// shape each outputs, its parameters, and the dtype its weights are kept in and its output is
// computed in under the preset, derived from the preset and the autocast policy table as the
// ops apply it (amp::policy_for): a way to see where mixed precision computes in 16 bits. What
// a layer type contributes (its policy row, normalisation, "why") comes with its row
// (nn::ModelFileLayer, from the type's one entry in src/nn): nothing here names a type.
#include <algorithm>
#include <cstdio>
#include <map>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/amp/amp.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "suggest.h"

namespace mixprec::cli {
namespace {

struct SummaryFlags {
  std::string model = "cnn", precision = "amp-bf16", input;
  int64_t classes = 0;
};

DType wider(DType a, DType b) {
  auto rank = [](DType d) { return d == DType::f64 ? 3 : d == DType::f32 ? 2 : 1; };
  return rank(a) >= rank(b) ? a : b;
}

// The dtype each row outputs, in row order: autocast casts per the table (lower: the
// autocast dtype, fp32: f32, promote: the widest input, keep: the input's); without autocast
// (O2, pure) the input is cast to the weights' dtype once and every layer keeps it. A
// residual row outputs x + f(x): the wider of its input and its body's output.
std::vector<DType> output_dtypes(const std::vector<nn::ModelFileLayer>& rows, const amp::Preset& preset) {
  std::vector<DType> out(rows.size(), DType::f32);
  DType x = preset.autocast_dtype ? DType::f32 : preset.param_dtype;
  struct Open {
    size_t row;
    DType entry;
  };
  std::vector<Open> open;        // residual rows whose body is being walked
  std::vector<int> fp32_depths;  // precision: fp32 scopes (a residual's body inherits it)
  auto close_until = [&](int depth) {
    while (!open.empty() && rows[open.back().row].depth >= depth) {
      x = wider(open.back().entry, x);
      out[open.back().row] = x;
      open.pop_back();
    }
    while (!fp32_depths.empty() && fp32_depths.back() >= depth) fp32_depths.pop_back();
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const nn::ModelFileLayer& r = rows[i];
    close_until(r.depth);
    const bool fp32 = r.precision == "fp32" || !fp32_depths.empty();
    if (r.block) {
      if (r.precision == "fp32") fp32_depths.push_back(r.depth);
      open.push_back({i, fp32 ? DType::f32 : x});
      if (fp32) x = DType::f32;
      continue;
    }
    if (fp32) x = DType::f32;
    else if (preset.autocast_dtype && r.output_op) {
      switch (amp::policy_for(*r.output_op)) {
        case amp::CastPolicy::lower: x = *preset.autocast_dtype; break;
        case amp::CastPolicy::fp32: x = DType::f32; break;
        default: break;  // promote / keep: one input here, its dtype
      }
    }
    out[i] = x;
  }
  close_until(0);
  return out;
}

// A layer type's "why" (nn::ModelFileLayer::autocast_why) with the autocast dtype in place.
std::string with_autocast(std::string why, DType autocast) {
  const std::string mark = "{autocast}";
  if (auto at = why.find(mark); at != std::string::npos) why.replace(at, mark.size(), dtype_name(autocast));
  return why;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

int run_summary(const SummaryFlags& f) {
  auto preset = amp::preset_by_name(f.precision);
  if (!preset.is_ok()) {
    std::fprintf(stderr, "mixprec: usage error: --precision: %s\n", preset.status().message().c_str());
    return kExitUsage;
  }
  int64_t c = 1, h = 28, w = 28, classes = f.classes > 0 ? f.classes : 10;
  if (!nn::is_model_file(f.model)) {
    auto spec = nn::model_spec(f.model);
    if (!spec.is_ok()) {
      std::fprintf(stderr, "mixprec: usage error: --model: %s\n", spec.status().message().c_str());
      return kExitUsage;
    }
    c = spec->channels, h = spec->height, w = spec->width;
    if (f.classes == 0) classes = spec->classes;
    if (!f.input.empty()) {
      std::fprintf(stderr, "mixprec: usage error: --input: built-in model %s has a fixed input (%lldx%lldx%lld)\n",
                   f.model.c_str(), (long long)c, (long long)h, (long long)w);
      return kExitUsage;
    }
    auto model = nn::make_model(*spec);
    std::printf("model %s (built in): %lld parameters, input %lldx%lldx%lld, %lld classes, precision %s\n",
                f.model.c_str(), (long long)model->num_parameters(), (long long)c, (long long)h, (long long)w,
                (long long)classes, preset->name.c_str());
    std::printf("%-28s %-18s %12s  %s\n", "module", "type", "parameters", "weights");
    int64_t listed = 0;
    for (const auto& [name, m] : model->named_modules()) {
      // A module's own parameters (not its children's): a leaf layer's, or those a container
      // holds directly, such as attention's fused Q/K/V input projection beside its out_proj.
      int64_t own = m->num_parameters();
      for (const auto& child : m->children()) own -= child.second->num_parameters();
      if (own == 0) continue;
      listed += own;
      const bool norm = nn::is_normalization_layer(*m);
      const DType weights = norm && preset->keep_norm_fp32 ? DType::f32 : preset->param_dtype;
      std::printf("%-28s %-18s %12lld  %s%s\n", (name.empty() ? "(model)" : name.c_str()), m->type_name(),
                  (long long)own, dtype_name(weights), m->children().empty() ? "" : "  (its own, beside its children's)");
    }
    MIXPREC_CHECK(listed == model->num_parameters(), "summary: the rows do not add up to the model's parameters");
    // The model file that is this built-in, where there is one (same layers and names).
    static const std::map<std::string, std::string> as_file = {{"cnn", "models/cnn.yaml"},
                                                                {"gpt-tiny", "models/gpt-tiny.yaml"},
                                                                {"gpt", "models/gpt.yaml"},
                                                                {"resnet20", "models/resnet20.yaml"},
                                                                {"transformer", "models/transformer.yaml"},
                                                                {"mlp", "models/wide-mlp.yaml"}};
    if (auto it = as_file.find(f.model); it != as_file.end())
      std::printf("(layer by layer shapes and compute dtypes are shown for model files: %s is this %s as one)\n",
                  it->second.c_str(), f.model.c_str());
    else
      std::printf("(layer by layer shapes and compute dtypes are shown for model files: docs/models.md)\n");
    return kExitOk;
  }
  auto text = nn::read_model_file(f.model);
  if (!text.is_ok()) {
    std::fprintf(stderr, "mixprec: usage error: --model %s: %s\n", f.model.c_str(), text.status().message().c_str());
    return kExitUsage;
  }
  // A text classifier reads T byte ids (--input T, default 128: --max-tokens' default); a
  // language model its context.
  const nn::ModelSpec file_spec = nn::model_file_spec(f.model, *text);
  const bool language_model = file_spec.language_model, reads_text = file_spec.token_input || language_model;
  if (reads_text) c = 1, h = 1, w = language_model ? file_spec.width - 1 : 128;
  if (language_model) {
    if (f.classes > 0 && f.classes != 256) {
      std::fprintf(stderr, "mixprec: usage error: --classes: %s is a language model over the 256 byte values\n",
                   f.model.c_str());
      return kExitUsage;
    }
    classes = 256;
    if (!f.input.empty()) {
      std::fprintf(stderr, "mixprec: usage error: --input: %s is a language model of context %lld (its embedding's "
                           "context: N sets it)\n", f.model.c_str(), (long long)w);
      return kExitUsage;
    }
  }
  if (!f.input.empty()) {
    long long a = 0, b = 0, d = 0;
    char tail = 0;
    if (reads_text) {
      if (std::sscanf(f.input.c_str(), "%lld%c", &d, &tail) != 1 || d < 1 || d > 4096) {
        std::fprintf(stderr, "mixprec: usage error: --input: %s reads texts: expected their length in bytes T (1..4096), "
                             "got '%s'\n", f.model.c_str(), f.input.c_str());
        return kExitUsage;
      }
      w = d;
    } else {
      if (std::sscanf(f.input.c_str(), "%lldx%lldx%lld%c", &a, &b, &d, &tail) != 3 || a < 1 || b < 1 || d < 1 ||
          a > 4096 || b > 16384 || d > 16384) {
        std::fprintf(stderr, "mixprec: usage error: --input: expected CxHxW (e.g. 3x32x32), got '%s'\n", f.input.c_str());
        return kExitUsage;
      }
      c = a, h = b, w = d;
    }
  }
  std::vector<nn::ModelFileLayer> rows;
  auto model = nn::build_model_file(*text, f.model, c, h, w, classes, &rows, nn::kMaxModelFileParameters, reads_text);
  if (!model.is_ok()) {
    std::fprintf(stderr, "mixprec: usage error: %s\n", model.status().message().c_str());
    return kExitUsage;
  }
  const std::vector<DType> computed = output_dtypes(rows, *preset);
  std::printf("model %s: %lld parameters, input %lldx%lldx%lld, %lld classes, precision %s (%s)\n",
              f.model.c_str(), (long long)(*model)->num_parameters(), (long long)c, (long long)h, (long long)w,
              (long long)classes, preset->name.c_str(), preset->description);
  // The type column fits the longest type name (conv_transpose2d), 15 wide at least.
  int type_width = 15;
  for (const nn::ModelFileLayer& r : rows) type_width = std::max(type_width, int(r.type.size()));
  std::printf("%-24s %-*s %-16s %12s  %-7s %-6s %s\n", "layer", type_width, "type", "output", "parameters", "weights", "output",
              "why");
  for (size_t i = 0; i < rows.size(); ++i) {
    const nn::ModelFileLayer& r = rows[i];
    const std::string weights =
        r.parameters == 0 ? "-" : dtype_name(r.normalization && preset->keep_norm_fp32 ? DType::f32 : preset->param_dtype);
    std::string why;
    if (r.precision == "fp32") why = "precision: fp32 in the file";
    else if (r.block) why = r.autocast_why;
    else if (preset->autocast_dtype && !r.autocast_why.empty()) why = with_autocast(r.autocast_why, *preset->autocast_dtype);
    else if (preset->autocast_dtype && r.output_op) why = std::string("autocast: ") + amp::policy_name(amp::policy_for(*r.output_op));
    else if (!preset->autocast_dtype) why = "no autocast: the weights' dtype throughout";
    std::printf("%-24s %-*s %-16s %12lld  %-7s %-6s %s\n", (std::string(size_t(2 * r.depth), ' ') + r.name).c_str(),
                type_width, r.type.c_str(), shape_text(r.output_shape).c_str(), (long long)r.parameters, weights.c_str(),
                dtype_name(computed[i]), why.c_str());
  }
  std::printf("The loss (cross_entropy) runs in f32 under every preset%s.\n",
              preset->loss_scaling ? ", and the loss is scaled (GradScaler) before backward" : "");
  return kExitOk;
}

}  // namespace

Runner add_summary_command(CLI::App& app) {
  auto flags = std::make_shared<SummaryFlags>();
  CLI::App* cmd = app.add_subcommand(
      "summary", "A model's layers, output shapes, parameters and the dtype each runs in under a preset");
  cmd->add_option("--model", flags->model, "A built-in model or a model file FILE.yaml|.json")
      ->capture_default_str()
      ->check(model_name(nn::model_names()));
  cmd->add_option("--precision", flags->precision, "Precision preset")->capture_default_str()->check(precision_name());
  cmd->add_option("--input", flags->input,
                  "A model file's input, CxHxW (default 1x28x28, Fashion-MNIST's); for a text classifier T, its "
                  "bytes per text (default 128)");
  cmd->add_option("--classes", flags->classes, "Output classes (default: 10)")->check(integer_in(1, 256));
  return [flags]() { return run_summary(*flags); };
}

}  // namespace mixprec::cli
